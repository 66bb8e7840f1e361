"""node/admission.py: the stamp policy (a future, zero, negative or malformed stamp; a stamp before the sim clock
starts), what an admitted or refused observation makes the node count and log, arrivals and silence per modality,
and when an event-driven tick has what it waits for."""
from __future__ import annotations

from bayes_infer_ros.node import admission
from bayes_infer_ros.node.conversion import REJECT_REASONS

S = 1_000_000_000


def admit(sec, nsec=0, last=-1, now=1000 * S, timeout=1.0, future=0.5):
    return admission.admit_stamp(sec, nsec, last_ns=last, now_ns=now, timeout_s=timeout, max_future_s=future)


def test_one_future_stamp_cannot_shut_a_topic_out():
    now = 1000 * S
    day_ahead = admit(1000 + 86400, now=now)
    assert day_ahead.reason == "future" and "ahead of the node clock" in day_ahead.detail
    last = -1  # the refused message leaves the topic's order guard untouched
    accepted = 0
    for k in range(100):
        d = admit(1000, k * 1000, last=last, now=now + k * 1000)
        accepted += d.ok
        last = d.stamp_ns if d.ok else last
    assert accepted == 100
    # within max_future_stamp a message is accepted and holds back older ones for at most that long
    ahead = admit(1000, 400_000_000, now=now)
    assert ahead.ok
    assert admit(1000, 100, last=ahead.stamp_ns, now=now).reason == "out_of_order"
    assert admit(1000, 500_000_000, last=ahead.stamp_ns, now=now + 500_000_000).ok


def test_a_stamp_before_the_clock_starts_cannot_block_the_topic():
    """Sim time before the first /clock (node clock 0): a wall-clock-stamped message is accepted with its stamp,
    counted `before_clock`, and leaves the topic's order guard alone, so the sim-time stamps after it are never
    `out_of_order`."""
    before = admit(1_764_000_000, now=0)
    assert before.ok and before.before_clock and not before.ordered and before.stamp_ns == 1_764_000_000 * S
    inputs = admission.Inputs(["a"], [2])
    got = inputs.observe(0, 0, [], 1_764_000_000, 0, now=1.0, now_ns=0, arrival=1.0, timeout_s=1.0,
                         max_future_s=0.5)
    assert got.ok and got.before_clock and admission.report("a", got).counters == ("before_clock",)
    assert inputs.take()[1] == 1_764_000_000 * S  # the step keeps the message's stamp
    for k in range(5):  # /clock starts at 100 s: sim stamps are judged again, none is out of order
        now = 100 * S + k * 100_000_000
        assert inputs.observe(0, 1, [], 100, k * 100_000_000, now=1.1 + k, now_ns=now, arrival=1.1 + k,
                              timeout_s=1.0, max_future_s=0.5).ok
    assert inputs.modalities[0].rejected == {} and inputs.modalities[0].last_stamp_ns == 100 * S + 400_000_000


def test_every_stamp_refusal_is_a_documented_reason():
    for d in (admit(1000 + 86400), admit(-1), admit(1000, last=1001 * S), admit(900)):
        assert not d.ok and d.reason in REJECT_REASONS, d


def test_zero_negative_and_malformed_stamps():
    zero = admit(0, 0, last=5 * S, now=1000 * S)
    assert zero.ok and zero.unstamped and zero.stamp_ns == 1000 * S  # explicit: its arrival time on the node clock
    assert admit(-1, 0).reason == "bad_stamp"
    assert admit(-(2**31), 999).reason == "bad_stamp"
    assert admit(5, 10**9).reason == "bad_stamp"
    assert admit(999, 0, now=1000 * S, timeout=0.5).reason == "stale"
    assert admit(999, 0, now=1000 * S, timeout=0.0).ok  # timeout 0: no age check
    assert admit(2**31 - 1, 10**9 - 1, now=0).ok  # clock at 0 (sim time, no /clock yet): no future check


def test_output_stamps_stay_valid():
    for ns in (-5, 0, 7, (2**31 - 1) * S + (2**32 - 1), 2**80):
        sec, nsec = admission.output_stamp(ns)
        assert 0 <= sec <= 2**31 - 1 and 0 <= nsec < S
    assert admission.output_stamp(3 * S + 5) == (3, 5)
    assert admission.output_stamp(2**80) == (2**31 - 1, S - 1)


def test_being_rejected_window():
    assert admission.being_rejected(10.0, last_rejected=9.0, last_accepted=8.0)
    assert not admission.being_rejected(10.0, last_rejected=8.0, last_accepted=9.0)  # accepted since
    assert not admission.being_rejected(100.0, last_rejected=9.0, last_accepted=0.0)  # long ago
    assert not admission.being_rejected(10.0, last_rejected=0.0, last_accepted=0.0)


def test_a_refused_observation_is_counted_by_reason_and_warned_per_modality_and_reason():
    done = admission.report("camera", admission.Admission(reason="stale", detail="2.000 s old"))
    assert done.counters == ("rejected.stale",)
    assert done.warnings == ((("camera", "stale"), "observations/camera: dropped (stale): 2.000 s old"),)
    assert done.info == ""


def test_an_accepted_observation_counts_its_flags_and_says_when_a_silent_modality_resumes():
    done = admission.report("lidar", admission.Admission(renormalized=True, detail="sum 2 renormalized",
                                                         unstamped=True, superseded=True, resumed=True))
    assert done.counters == ("unstamped", "renormalized", "superseded")
    assert done.warnings == ((("lidar", "renormalized"), "observations/lidar: sum 2 renormalized"),)
    assert done.info == "observations/lidar: receiving again"
    assert admission.report("lidar", admission.Admission()) == admission.AdmissionReport()


def test_arrivals_are_counted_before_admission_and_silence_is_warned_once_per_modality():
    inputs = admission.Inputs(["a", "b"], [2, 3])
    inputs.heard_now(100.0)
    assert inputs.arrived(1, 100.5) is inputs.modalities[1] and inputs.modalities[1].received == 1
    got = inputs.observe(1, 0, [], 0, 0, now=100.5, now_ns=0, arrival=0.0, timeout_s=1.0, max_future_s=0.5)
    assert got.ok
    assert inputs.silence_warnings(101.2, 1.0) == [
        "observations/a: silent (no message yet for more than observation_timeout 1 s); ticks go on without it "
        "(no evidence)"]
    assert inputs.silence_warnings(101.3, 1.0) == []  # reported once
    inputs.arrived(1, 101.4)
    assert inputs.silence_warnings(102.0, 1.0) == [
        "observations/b: silent (no valid message for more than observation_timeout 1 s); ticks go on without "
        "it (no evidence)"]


def _observe(inputs, i, now, timeout_s=1.0):
    assert inputs.observe(i, 0, [], 0, 0, now=now, now_ns=0, arrival=now, timeout_s=timeout_s, max_future_s=0.5).ok


def test_an_event_tick_waits_for_every_modality_again_after_all_inputs_were_quiet():
    inputs = admission.Inputs(["a", "b", "c"], [2, 2, 2])
    inputs.heard_now(100.0)
    _observe(inputs, 0, 105.0)  # every modality silent (a paused bag): a resume, not a step of `a` alone
    assert not inputs.event_ready(105.0, 1.0)
    _observe(inputs, 1, 105.01)
    assert not inputs.event_ready(105.01, 1.0)
    _observe(inputs, 2, 105.02)
    assert inputs.event_ready(105.02, 1.0)
    assert inputs.take()[0].tolist() == [1, 0, 1, 0, 1, 0]
    # a modality that stays quiet is waited for up to observation_timeout after the resume, then left out
    _observe(inputs, 0, 110.0)
    _observe(inputs, 1, 110.0)
    assert not inputs.event_ready(110.9, 1.0) and inputs.event_ready(111.1, 1.0)


def test_a_modality_silent_while_the_others_talk_is_not_waited_for_and_its_late_message_joins_the_next_tick():
    inputs = admission.Inputs(["a", "b"], [2, 2])
    inputs.heard_now(100.0)
    _observe(inputs, 0, 100.5)
    _observe(inputs, 1, 100.5)
    inputs.take()
    _observe(inputs, 0, 101.2)
    assert not inputs.event_ready(101.2, 1.0) and inputs.event_ready(101.6, 1.0)  # b owed until it went silent
    inputs.take()
    _observe(inputs, 0, 101.8)  # `b` silent while `a` talks: `a` alone makes the step
    assert inputs.event_ready(101.8, 1.0)
    assert inputs.take()[0].tolist() == [1, 0, 0, 0]  # b: no evidence (all zero)
    _observe(inputs, 1, 101.81)  # b's message of the same step came a moment later: pending for the next tick
    assert not inputs.event_ready(101.81, 1.0)  # b talks again, and `a` is owed once more
    _observe(inputs, 0, 102.0)
    assert inputs.event_ready(102.0, 1.0) and inputs.take()[0].tolist() == [1, 0, 1, 0]
