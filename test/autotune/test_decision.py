"""The one decision (``autotune.decision``): devices and the GPU self-test, (device, variant) candidates, what starts
and what is verified or left out (and why), the verify step across devices and its noise rule, the kept decisions,
the memory budget. This machine has no GPU: a "GPU" here is either a
faked failure of the real lookup or a second JAX CPU device standing in for one (labelled "gpu"), which is what
the policy sees of a device: a name, a self-test, and timings."""
import json
from pathlib import Path

import jax
import numpy as np
import pytest

from bayes_infer_ros.autotune import decision as dec
from bayes_infer_ros.autotune import deployment as dep
from bayes_infer_ros.autotune import devices, select
from bayes_infer_ros.autotune.decision import DecisionCache
from bayes_infer_ros.autotune.select import MemoryBudget, MemoryBudgetExceeded
from bayes_infer_ros.autotune.timing import CandidateTiming
from bayes_infer_ros.inference import VARIANT_PLATFORMS, VARIANTS, InferenceEngine, VariantUnsupported
from bayes_infer_ros.inference.native import numba_available
from bayes_infer_ros.inference.registry import NATIVE_VARIANTS
from bayes_infer_ros.model import GenerativeModel, load_model
from engine_stubs import Broken, Slowed
from lab import generator as g

ROOT = Path(__file__).resolve().parents[2]
BUDGET = MemoryBudget.from_mib(2048, "memory_budget_mb")
NO_KERNEL = "CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image is available for execution on the device"


@pytest.fixture(scope="module")
def model():
    return load_model(ROOT / "config" / "agent.yaml")


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU that is present: JAX's CPU device under the name "gpu" (its self-test then runs for real)."""
    devices.self_test.cache_clear()
    monkeypatch.setattr(devices, "first_gpu", lambda: (jax.devices("cpu")[0], ""))
    yield
    devices.self_test.cache_clear()


@pytest.fixture
def broken_gpu(fake_gpu, monkeypatch):
    """A GPU whose jaxlib has no code for it: the self-test's program fails as it would on a Jetson Orin with
    PyPI's aarch64 CUDA wheels."""
    def no_kernel_image(device):
        raise RuntimeError(NO_KERNEL)
    monkeypatch.setattr(devices, "self_test_program", no_kernel_image)


# ---- devices and the self-test -------------------------------------------------------------------------
@pytest.mark.heavy
def test_cpu_only_machine_runs_on_the_cpu_and_says_why(model):
    decision = dep.decide(model, dec.EngineConfig("fpi"), BUDGET, cache=None)
    assert decision.device == "cpu:0" and decision.platform == "cpu"
    assert "no GPU" in decision.reason
    if numba_available():
        assert decision.variant == "fused_numba"


def test_device_gpu_without_a_gpu_is_refused_with_the_reason(model):
    with pytest.raises(devices.DeviceUnavailable, match="device: gpu: no GPU"):
        dep.decide(model, dec.EngineConfig("fpi", device="gpu"), BUDGET)


@pytest.mark.heavy
def test_a_gpu_that_fails_its_self_test_falls_back_to_the_cpu(model, broken_gpu):
    found = devices.find_devices("auto")
    assert list(found.by_platform) == ["cpu"]
    assert "self-test failed" in found.note and "no kernel image" in found.note
    decision = dep.decide(model, dec.EngineConfig("fpi"), BUDGET)
    assert decision.platform == "cpu" and "no kernel image" in decision.reason
    with pytest.raises(devices.DeviceUnavailable, match="self-test failed.*no kernel image"):
        dep.decide(model, dec.EngineConfig("fpi", device="gpu"), BUDGET)


def test_a_working_gpu_passes_the_self_test(fake_gpu):
    found = devices.find_devices("auto")
    assert set(found.by_platform) == {"cpu", "gpu"} and found.note == ""
    assert list(devices.find_devices("gpu").by_platform) == ["gpu"]
    assert list(devices.find_devices("cpu").by_platform) == ["cpu"]
    with pytest.raises(ValueError, match="device: expected one of"):
        devices.find_devices("tpu")


# ---- candidates and the verify step across devices ---------------------------------------------------------
def test_candidates_are_device_variant_pairs(model):
    pool = dec.candidates(model, dec.EngineConfig("fpi"), BUDGET, ["cpu", "gpu"])
    platforms = {c.platform for c in pool}
    assert platforms == {"cpu", "gpu"}
    # fused_numba runs only on the host CPU; the GPU's candidates are JAX variants
    assert all(c.variant != "fused_numba" for c in pool if c.platform == "gpu")
    assert [c.platform for c in pool] == sorted((c.platform for c in pool), key=["cpu", "gpu"].index)
    # a named variant is a candidate on every allowed device it runs on, and refused where it cannot run
    named = dec.candidates(model, dec.EngineConfig("fpi", "hybrid"), BUDGET, ["cpu", "gpu"])
    assert [(c.platform, c.variant) for c in named] == [("cpu", "hybrid"), ("gpu", "hybrid")]
    with pytest.raises(VariantUnsupported, match="fused_numba runs on cpu"):
        dec.candidates(model, dec.EngineConfig("fpi", "fused_numba", device="gpu"), BUDGET, ["gpu"])


@pytest.mark.heavy
@pytest.mark.parametrize("slow", ["cpu", "gpu"])
def test_auto_runs_the_measured_fastest_device(model, monkeypatch, slow):
    """Whichever device's candidates are slowed, the decision runs on the other one: ``device: auto`` is the
    measured fastest (device, variant): faster than every slowed candidate, and the fastest measured unless the
    plan's start is kept because no other candidate won beyond the noise."""
    cpu = jax.devices("cpu")[0]

    class Stand:  # a distinct device object for the "gpu", so the builder knows which candidate it builds
        platform, id = "gpu", 0

    gpu = Stand()
    found = devices.Devices({"cpu": cpu, "gpu": gpu})
    real = dep.engine_for

    def build(m, config, variant, device=None, budget=None):
        engine = real(m, config, variant, cpu)
        platform = "gpu" if device is gpu else "cpu"
        return Slowed(engine, 0.005) if platform == slow else engine

    monkeypatch.setattr(dep, "engine_for", build)
    decision = dep.decide(model, dec.EngineConfig("fpi", autotune_verify_top_k=2), BUDGET, found=found)
    assert decision.device == f"{decision.platform}:0"
    assert decision.platform != slow, decision.reason
    assert set(k.rsplit("@", 1)[1] for k in decision.timings) == {"cpu", "gpu"}
    chosen = decision.timings[f"{decision.variant}@{decision.platform}"]
    # faster than every slowed candidate; among the others the plan's start stays unless one wins beyond the noise
    assert chosen < min(t for k, t in decision.timings.items() if k.endswith(f"@{slow}"))
    assert chosen == min(decision.timings.values()) or "not faster beyond the noise" in decision.reason, \
        decision.reason


@pytest.mark.heavy
def test_device_settings_restrict_the_candidates(model, fake_gpu):
    for setting, expected in (("cpu", {"cpu"}), ("gpu", {"gpu"})):
        decision = dep.decide(model, dec.EngineConfig("fpi", device=setting), BUDGET)
        assert {k.rsplit("@", 1)[1] for k in decision.timings} == expected
        assert decision.platform in expected


@pytest.mark.parametrize("field, value", [("algorithm", "fpx"), ("variant", "fused_magic"), ("variant", "")])
def test_settings_with_an_unknown_name_are_refused_naming_the_field(field, value):
    """The settings are checked when made: an unknown algorithm or variant never reaches a plan."""
    kwargs = {"algorithm": "fpi", field: value}
    with pytest.raises(ValueError, match=f"{field}: unknown"):
        dec.EngineConfig(**kwargs)


def test_every_variant_declares_its_platforms():
    """``VARIANT_PLATFORMS`` (what the plan reads) is what each variant's engine class declares."""
    assert list(VARIANT_PLATFORMS) == list(VARIANTS)
    for name, platforms in VARIANT_PLATFORMS.items():
        cls = NATIVE_VARIANTS.get(name, InferenceEngine)
        assert platforms == cls.capabilities.platforms and platforms, name


# ---- kept decisions ---------------------------------------------------------------------------------------
def test_the_key_holds_the_horizon_only_where_the_verify_step_times_it(model):
    """FPI's verify step times one step whatever the node's ``horizon``: a new horizon finds the same record. A
    window algorithm times its window: another horizon is another decision."""
    def key(algorithm, horizon):
        config = dec.EngineConfig(algorithm, horizon=horizon, device="cpu")
        return DecisionCache.key(dec._cache_parts(model, config, BUDGET, ["cpu"]))

    assert key("fpi", 1) == key("fpi", 6) and len(key("fpi", 1)) >= 16
    assert key("mmp", 2) != key("mmp", 6) and key("mmp", 2) != key("fpi", 2)


@pytest.mark.heavy
def test_a_kept_decision_is_reused_without_timing(model, tmp_path, monkeypatch):
    cache = DecisionCache(tmp_path / "decisions")
    first = dep.decide(model, dec.EngineConfig("fpi", device="cpu"), BUDGET, cache=cache)
    assert len(list((tmp_path / "decisions").glob("*.json"))) == 1 and cache.warnings == []
    monkeypatch.setattr(dep, "time_round_robin", lambda *a, **k: pytest.fail("a kept decision was timed again"))
    again = dep.decide(model, dec.EngineConfig("fpi", device="cpu"), BUDGET, cache=cache)
    assert (again.device, again.variant) == (first.device, first.variant) and "decision cache" in again.reason
    # another setting is another key: timed again
    with pytest.raises(pytest.fail.Exception, match="timed again"):
        dep.decide(model, dec.EngineConfig("fpi", num_iter=8, device="cpu"), BUDGET, cache=cache)


def test_an_unwritable_decision_cache_is_a_warning(model, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    cache = DecisionCache(blocker / "decisions")  # a folder under a regular file: never writable, even for root
    decision = dep.decide(model, dec.EngineConfig("fpi", device="cpu"), BUDGET, cache=cache)
    assert decision.engine is not None
    assert len(decision.warnings) == 1 and "not writable" in decision.warnings[0]
    assert "BAYES_INFER_DECISION_CACHE" in decision.warnings[0]


def _replace(**fields):
    return lambda record, other: json.dumps({**record, **fields})


def _timings_text(record, other):
    return json.dumps({**record, "timings": {f"{record['variant']}@{record['device']}": "fast"}})


def _truncated(record, other):
    text = json.dumps(record)
    return text[: len(text) // 2]


# A record that is not one this decision can use. The three first: valid JSON, device and variant from the
# shortlist, timings that are not a map of seconds. Then wrong types in every field, missing fields, values JSON
# allows but seconds do not, text that is not JSON, a directory in the file's place, another model's record, and
# a candidate that is not one here.
BAD_RECORDS = {
    "timings_list": _replace(timings=[1, 2]),
    "timings_null": _replace(timings=None),
    "timings_text": _timings_text,
    "timings_nan": _replace(timings={"baseline@cpu": float("nan")}),
    "timings_negative": _replace(timings={"baseline@cpu": -1.0}),
    "timings_bool": _replace(timings={"baseline@cpu": True}),
    "device_number": _replace(device=0),
    "device_null": _replace(device=None),
    "variant_list": _replace(variant=["fused_numba"]),
    "variant_dict": _replace(variant={"name": "baseline"}),
    "created_number": _replace(created=20260101),
    "key_number": _replace(key=7),
    "no_variant": lambda record, other: json.dumps({k: v for k, v in record.items() if k != "variant"}),
    "no_timings": lambda record, other: json.dumps({k: v for k, v in record.items() if k != "timings"}),
    "a_list": lambda record, other: json.dumps([record]),
    "a_string": lambda record, other: json.dumps("baseline@cpu"),
    "truncated": _truncated,
    "empty": lambda record, other: "",
    "not_utf8": lambda record, other: b"\xff\xfe{\x00",
    "directory": None,
    "another_model": lambda record, other: json.dumps(other),
    "not_a_candidate": _replace(device="gpu", variant="hybrid"),
    "variant_unknown": _replace(variant="fused_magic"),
}


@pytest.fixture(scope="module")
def kept_records(model, tmp_path_factory):
    """A verified decision of the shipped model and one of another model (other sizes), as kept on disk."""
    folder = tmp_path_factory.mktemp("kept")
    cache = DecisionCache(folder)
    dep.decide(model, dec.EngineConfig("fpi", device="cpu", autotune_verify_top_k=1), BUDGET, cache=cache)
    [mine] = folder.glob("*.json")
    other_model = GenerativeModel(A=[np.full((2, 3), 0.5)], A_dependencies=[[0]]).validate()
    dep.decide(other_model, dec.EngineConfig("fpi", device="cpu", autotune_verify_top_k=1), BUDGET, cache=cache)
    [other] = [p for p in folder.glob("*.json") if p != mine]
    return mine.name, json.loads(mine.read_text()), json.loads(other.read_text())


@pytest.mark.heavy
@pytest.mark.parametrize("bad", list(BAD_RECORDS))
def test_a_kept_decision_that_cannot_be_used_is_timed_again_with_one_warning_naming_it(model, kept_records, tmp_path,
                                                                                        bad):
    """Anything read from the decision cache is untrusted: a record that is damaged, of the wrong types, another
    model's or a candidate that is not one here is a miss. The candidates are timed again (never a failed decide),
    one warning names the file, and the new decision replaces the record (a directory in its place stays: timed at
    every start)."""
    name, record, other = kept_records
    path = tmp_path / name
    if BAD_RECORDS[bad] is None:
        path.mkdir()
    else:
        content = BAD_RECORDS[bad](record, other)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    cache = DecisionCache(tmp_path)
    decision = dep.decide(model, dec.EngineConfig("fpi", device="cpu", autotune_verify_top_k=1), BUDGET, cache=cache)
    assert decision.engine is not None and "decision cache" not in decision.reason, decision.reason
    assert "timed here" in decision.reason and decision.timings
    assert len(decision.warnings) == 1 and str(path) in decision.warnings[0], decision.warnings
    fresh = DecisionCache(tmp_path)
    if bad == "directory":
        assert path.is_dir()
        return
    kept = fresh.load(name[:-len(".json")])
    assert kept is not None and fresh.warnings == [] and kept["variant"] == decision.variant


@pytest.mark.heavy
def test_a_kept_decision_that_no_longer_builds_is_timed_again_with_a_warning(model, kept_records, tmp_path,
                                                                              monkeypatch):
    name, record, _ = kept_records
    (tmp_path / name).write_text(json.dumps(record))
    real = dep.engine_for
    refused = {"first": True}

    def build(m, config, variant, device=None, budget=None):
        if refused.pop("first", False):
            raise RuntimeError("the kept variant does not build here any more")
        return real(m, config, variant, device)

    monkeypatch.setattr(dep, "engine_for", build)
    decision = dep.decide(model, dec.EngineConfig("fpi", device="cpu", autotune_verify_top_k=1), BUDGET,
                          cache=DecisionCache(tmp_path))
    assert decision.engine is not None and "decision cache" not in decision.reason
    assert len(decision.warnings) == 1 and str(tmp_path / name) in decision.warnings[0]
    assert "does not build here any more" in decision.warnings[0]


# ---- the memory budget ---------------------------------------------------------------------------------------
def test_one_budget_in_bytes_names_its_setting(model):
    assert MemoryBudget.from_mib(2048, "memory_budget_mb").bytes == MemoryBudget.from_gib(2.0).bytes == 2**31
    tiny = MemoryBudget.from_mib(1e-6, "memory_budget_mb")
    with pytest.raises(MemoryBudgetExceeded, match=r"over memory_budget_mb 1e-06 \(1 B\)"):
        dep.decide(model, dec.EngineConfig("fpi", "hybrid", device="cpu"), tiny)
    # auto: nothing fits, the baseline runs every model
    assert dep.decide(model, dec.EngineConfig("fpi", device="cpu"), tiny).variant == "baseline"


# ---- the node's deployment: the self-test's fallback reaches what it runs --------------------------------------
@pytest.mark.heavy
def test_the_nodes_build_falls_back_from_a_broken_gpu_with_the_reason(model, broken_gpu, tmp_path):
    cache = DecisionCache(tmp_path)
    slot = dep.deploy(model, dec.EngineConfig("fpi", device="auto"), BUDGET, cache=cache)
    assert slot.device == "cpu:0" and slot.engine.device == "cpu"
    assert "self-test failed" in slot.note and "no kernel image" in slot.note  # /diagnostics' variant_note
    with pytest.raises(devices.DeviceUnavailable, match="no kernel image"):
        dep.deploy(model, dec.EngineConfig("fpi", device="gpu"), BUDGET, cache=cache)


# ---- a GPU only numba can use, and candidates that do not run ---------------------------------------------
def test_a_gpu_only_numba_sees_runs_only_the_native_gpu_engines(model, monkeypatch):
    """JAX has no GPU (a CPU-only jaxlib on a Jetson) but numba's CUDA target has one: the GPU's candidates are the
    native GPU engines alone, never a JAX program placed on it."""
    from bayes_infer_ros.inference.native import CudaEngine

    monkeypatch.setattr(CudaEngine, "available", staticmethod(lambda: True))  # numba sees a CUDA device
    found = devices.find_devices("auto")
    assert isinstance(found.by_platform["gpu"], devices.NumbaCudaDevice) and "fused_cuda" in found.note
    pool = dec.candidates(model, dec.EngineConfig("fpi"), BUDGET, list(found.by_platform), native_only=["gpu"])
    assert [c.variant for c in pool if c.platform == "gpu"] == ["fused_cuda"]
    assert dec.candidates(model, dec.EngineConfig("fpi", "hybrid"), BUDGET, ["cpu", "gpu"], native_only=["gpu"]) == [
        dec.Candidate("cpu", "hybrid")]


def test_a_candidate_that_fails_its_first_call_drops_out_with_the_reason(model, monkeypatch):
    """A kernel that cannot compile for this device fails at its first call: the verify step times the others and
    says why that one did not run, instead of failing the configure."""
    cpu = jax.devices("cpu")[0]
    real = dep.engine_for

    def build(m, config, variant, device=None, budget=None):
        engine = real(m, config, variant, cpu)
        return Broken(engine, RuntimeError("NvvmSupportError: libNVVM cannot be found")) if variant != "baseline" else engine

    monkeypatch.setattr(dep, "engine_for", build)
    decision = dep.decide(model, dec.EngineConfig("fpi"), BUDGET, found=devices.Devices({"cpu": cpu}))
    assert decision.variant == "baseline" and decision.engine is not None
    assert "did not run (RuntimeError: NvvmSupportError" in decision.reason
    assert all(t == float("inf") for name, t in decision.timings.items() if not name.startswith("baseline"))


# ---- the pipeline: candidates -> decision cache -> start -> verification -> record ------------------------------
def _timing(p10_ms, p90_ms, samples_ms=()):
    return CandidateTiming(p10_ms * 1e-3, (p10_ms + p90_ms) * 5e-4, p90_ms * 1e-3, 0.0, 20, 1,
                           tuple(x * 1e-3 for x in samples_ms))


def _rounds(times_ms):
    """A CandidateTiming whose statistics come from its per-round times (ms)."""
    xs = np.asarray(times_ms, dtype=float)
    return _timing(np.percentile(xs, 10), np.percentile(xs, 90), xs)


def test_the_noise_rule_compares_round_by_round():
    """Under load a preempted round is slow for whichever candidate ran in it: the spreads overlap, yet round by round
    a candidate twice as fast wins every round. A tie (2% faster) or a coin toss (faster in half the rounds) does
    not replace the start."""
    rng = np.random.default_rng(0)
    load = np.where(rng.random(40) < 0.3, 20.0, 1.0)  # 30% of the rounds preempted 20x
    start = _rounds(2.0 * load)
    twice = _rounds(1.0 * load)
    assert twice.p90_s > start.time_s  # the spreads overlap: a percentile rule would call it noise
    assert dec.wins_beyond_noise(twice, start)
    assert not dec.wins_beyond_noise(_rounds(1.96 * load), start)  # faster in every round, by 2%: a tie
    coin = _rounds(np.where(np.arange(40) % 2 == 0, 1.0, 3.0) * load)
    assert not dec.wins_beyond_noise(coin, start)


@pytest.mark.skipif(not numba_available(), reason="the numba install's rule")
def test_with_numba_fused_numba_starts_without_a_ranking(model, monkeypatch):
    """No choice to rank on the CPU where numba is installed: fused_numba starts, read from the install's model file,
    and neither the structure features nor a classifier are computed."""
    monkeypatch.setattr(select, "structure_features", lambda *a, **k: pytest.fail("features were computed"))
    monkeypatch.setattr(select, "ranking", lambda *a, **k: pytest.fail("a ranking was computed"))
    plan = dec.plan_decision(model, dec.EngineConfig("fpi", device="cpu"), BUDGET)
    assert plan.start == dec.Candidate("cpu", "fused_numba") and "training models" in plan.reason
    assert set(plan.verify) | {c for c, _ in plan.skipped} == {dec.Candidate("cpu", "baseline")}
    assert plan.describe().startswith("runs fused_numba@cpu (")


@pytest.mark.skipif(not numba_available(), reason="the numba install's rule")
def test_a_candidate_predicted_to_lose_by_a_wide_margin_is_never_compiled(monkeypatch):
    """The large generated model c0771 is nearest to training models on which baseline lost 3.8x or more to
    fused_numba: baseline is left out with that reason, and nothing but fused_numba is built."""
    spec = next(s for s in g.generate_specs() if s.config_id == "c0771")
    plan = dec.plan_decision(spec, dec.EngineConfig("fpi", device="cpu"), BUDGET)
    assert plan.start.variant == "fused_numba" and plan.verify == ()
    (left_out, why), = plan.skipped
    assert left_out.variant == "baseline" and "predicted at least" in why and "slower than fused_numba" in why
    assert f"not compiled: baseline@cpu ({why})" in plan.describe()
    built = []
    monkeypatch.setattr(dep, "engine_for", lambda m, c, variant, device=None, budget=None: built.append(variant))
    monkeypatch.setattr(dep, "time_round_robin", lambda *a, **k: pytest.fail("nothing is left to time"))
    dep.decide(spec, dec.EngineConfig("fpi", device="cpu"), BUDGET, found=plan.devices)
    assert built == ["fused_numba"]


def test_verify_top_k_zero_verifies_nothing_and_says_so(model):
    plan = dec.plan_decision(model, dec.EngineConfig("fpi", autotune_verify_top_k=0, device="cpu"), BUDGET)
    assert plan.verify == () and plan.skipped
    assert all("autotune_verify_top_k is 0" in why or "predicted" in why for _, why in plan.skipped)


def test_the_start_is_replaced_only_beyond_the_measured_noise(tmp_path):
    start, other = dec.Candidate("cpu", "fused_numba"), dec.Candidate("cpu", "baseline")
    plan = dec.Plan(dec.EngineConfig("fpi"), start, (other,), cache_key="k")
    overlap = dec.conclude(plan, {"fused_numba@cpu": _timing(1.0, 1.4), "baseline@cpu": _timing(0.8, 1.1)}, {})
    assert not overlap.swap and overlap.run == start and "not faster beyond the noise" in overlap.reason
    cache = DecisionCache(tmp_path)
    clear = dec.conclude(plan, {"fused_numba@cpu": _timing(1.0, 1.4), "baseline@cpu": _timing(0.5, 0.9)}, {}, cache)
    assert clear.swap and clear.run == other and clear.reason.startswith("swaps to baseline@cpu")
    assert cache.load("k")["variant"] == "baseline"  # recorded: the next start runs it at once
    broken = dec.conclude(plan, {"baseline@cpu": _timing(3.0, 4.0)}, {"fused_numba@cpu": "RuntimeError: no"})
    assert broken.swap and broken.run == other and "fused_numba@cpu did not run (RuntimeError: no)" in broken.reason
    none = dec.conclude(plan, {}, {"fused_numba@cpu": "a", "baseline@cpu": "b"})
    assert not none.swap and none.run == start and "no candidate ran" in none.reason


def test_among_winners_the_one_with_the_lowest_ranking_statistic_runs():
    """Two candidates both beat the start beyond the noise: the one whose ``time_s`` (the statistic the decision's
    timings report and every comparison uses) is lowest runs, even where its median is the higher one."""
    start = dec.Candidate("cpu", "fused_numba")
    low_p10, low_median = dec.Candidate("gpu", "baseline"), dec.Candidate("gpu", "clustered_hybrid_block")
    plan = dec.Plan(dec.EngineConfig("fpi"), start, (low_p10, low_median))
    lo = CandidateTiming(0.50e-3, 0.80e-3, 0.85e-3, 0.0, 20, 1)
    mid = CandidateTiming(0.60e-3, 0.62e-3, 0.70e-3, 0.0, 20, 1)
    out = dec.conclude(plan, {"fused_numba@cpu": _timing(2.0, 2.2), "baseline@gpu": lo,
                              "clustered_hybrid_block@gpu": mid}, {})
    assert out.swap and out.run == low_p10, out.reason


def test_a_recorded_decision_starts_at_once_with_nothing_to_verify(model, tmp_path):
    cache = DecisionCache(tmp_path)
    config = dec.EngineConfig("fpi", device="cpu")
    plan = dec.plan_decision(model, config, BUDGET, cache=cache)
    if not plan.verify:
        pytest.skip("nothing to verify for this model on this install")
    assert plan.cache_key and cache.load(plan.cache_key) is None
    winner = plan.verify[-1]
    dec.conclude(plan, {str(plan.start): _timing(2.0, 2.2), str(winner): _timing(1.0, 1.1)}, {}, cache)
    again = dec.plan_decision(model, config, BUDGET, cache=cache)
    assert again.start == winner and again.verify == () and "decision cache" in again.reason


def test_a_start_that_refuses_the_model_gives_way_to_the_next_candidate(model, monkeypatch):
    real = dep.engine_for

    def build(m, config, variant, device=None, budget=None):
        if variant == "fused_numba":
            raise MemoryError("the packed model is over the engine's own limit")
        return real(m, config, variant, device)

    monkeypatch.setattr(dep, "engine_for", build)
    plan = dec.Plan(dec.EngineConfig("fpi"), dec.Candidate("cpu", "fused_numba"), (dec.Candidate("cpu", "baseline"),),
                    devices=devices.Devices({"cpu": jax.devices("cpu")[0]}))
    started, engine = dep.start_engine(plan, model)
    assert started.start.variant == "baseline" and started.verify == () and engine.variant == "baseline"
    assert "refused the model: MemoryError" in started.describe()
