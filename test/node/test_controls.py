"""node/controls.py: a Controls message checked against the model (indices, labels, both), the timeline that
places controls by stamp, and late controls written onto their transition of the VMP/MMP window."""
from __future__ import annotations

import numpy as np

from bayes_infer_ros.inference.belief_filter import SequenceWindow
from bayes_infer_ros.node import conversion as conv
from bayes_infer_ros.node.controls import ControlTimeline, check_controls, fill_window_actions


def test_check_controls():
    a, why = check_controls([2, 0], [], (3, 1), None)
    assert a.tolist() == [2, 0] and a.dtype == np.int32 and not why
    assert check_controls([1], [], (3, 1), None)[0] is None
    assert "out of range" in check_controls([3, 0], [], (3, 1), None)[1]
    assert check_controls([-1, 0], [], (3, 1), None)[0] is None
    labels = [["stay", "next", "previous"], ["none"]]
    assert check_controls([1, 0], ["next", "none"], (3, 1), labels)[0].tolist() == [1, 0]
    assert check_controls([], ["previous", "none"], (3, 1), labels)[0].tolist() == [2, 0]  # labels alone
    a, why = check_controls([1, 0], ["stay", "none"], (3, 1), labels)
    assert a is None and "index 1 is 'next' but the label says 'stay'" in why
    assert "unknown control label 'jump'" in check_controls([], ["jump", "none"], (3, 1), labels)[1]
    assert "labels given but the model has no control labels" in check_controls([1, 0], ["a", "b"], (3, 1), None)[1]
    assert "1 labels" in check_controls([1, 0], ["next"], (3, 1), labels)[1]
    assert "bad_control" in conv.REJECT_REASONS and "bad_action" not in conv.REJECT_REASONS


def test_control_timeline_places_controls_by_stamp():
    tl = ControlTimeline(2)
    np.testing.assert_array_equal(tl.at(100), [0, 0])  # nothing received: control 0
    tl.add(150, [2, 0])
    tl.add(50, [1, 0])   # arrives late, belongs earlier
    np.testing.assert_array_equal(tl.at(50), [0, 0])    # strictly before the step's stamp
    np.testing.assert_array_equal(tl.at(100), [1, 0])
    np.testing.assert_array_equal(tl.at(151), [2, 0])
    tl.add(150, [0, 0])  # same stamp: replaces
    np.testing.assert_array_equal(tl.at(200), [0, 0])
    tl.add(250, [1, 0])
    np.testing.assert_array_equal(tl.latest(), [1, 0])
    tl.forget_before(200)  # keeps what a transition into a step after 200 can use
    assert len(tl) == 2
    np.testing.assert_array_equal(tl.at(201), [0, 0])
    np.testing.assert_array_equal(tl.at(100), [1, 0])   # folded into `held`
    small = ControlTimeline(1, capacity=2)
    for stamp, u in ((10, 1), (20, 2), (30, 3)):
        small.add(stamp, [u])
    assert len(small) == 2 and small.held.tolist() == [1]


def test_late_controls_land_on_their_window_transition():
    """Steps at 100, 200, 300; the control of 100 -> 200 (stamped 150) arrives after step 300 was pushed."""
    w = SequenceWindow(4, (2,), 1)
    tl = ControlTimeline(1)
    tl.add(250, [2])
    for stamp in (100, 200, 300):
        w.push(np.float32([0.5, 0.5]), tl.at(stamp), stamp)
    np.testing.assert_array_equal(w.stamps, [-1, 100, 200, 300])
    np.testing.assert_array_equal(w.actions[:, 0], [0, 0, 2])
    tl.add(150, [1])
    fill_window_actions(w.actions, w.stamps, w.valid_steps, tl)
    np.testing.assert_array_equal(w.actions[:, 0], [0, 1, 2])  # padding transition untouched


def test_a_control_of_some_factors_keeps_the_others_and_holds_until_that_factor_is_set_again():
    """A control adapter sets one factor (controls.<factor>), a Controls message the factors no adapter feeds: each
    entry keeps the other factors' control in effect at its stamp, and a late entry's factor holds in the later
    entries up to the first that sets that factor itself."""
    tl = ControlTimeline(2)
    motion, other = np.array([True, False]), np.array([False, True])
    tl.add(100, [1, 0], motion)          # the adapter: motion = 1
    tl.add(200, [0, 2], other)           # a Controls message: the other factor = 2, motion kept
    np.testing.assert_array_equal(tl.at(150), [1, 0])
    np.testing.assert_array_equal(tl.at(250), [1, 2])
    tl.add(50, [3, 0], motion)           # a late command, before both: motion = 3 until the entry at 100 sets it
    np.testing.assert_array_equal(tl.at(60), [3, 0])
    np.testing.assert_array_equal(tl.at(150), [1, 0])
    tl.add(150, [0, 1], other)           # a late Controls between them: motion stays as set at 100
    np.testing.assert_array_equal(tl.at(160), [1, 1])
    np.testing.assert_array_equal(tl.at(250), [1, 2])
    tl.add(120, [4, 0], motion)          # a late command: holds through 150 and 200 (they do not set motion)
    np.testing.assert_array_equal([tl.at(t).tolist() for t in (130, 160, 250)], [[4, 0], [4, 1], [4, 2]])
    tl.add(120, [0, 5], other)           # the same stamp, the other factor: merged into that entry
    np.testing.assert_array_equal(tl.at(130), [4, 5])
    np.testing.assert_array_equal(tl.at(160), [4, 1])  # the entry at 150 sets the other factor itself
    tl.add(300, [9, 9])                  # a full control sets both
    np.testing.assert_array_equal(tl.latest(), [9, 9])
    tl.forget_before(200)
    tl.add(250, [7, 0], motion)          # after folding: still merged with what holds at 250
    np.testing.assert_array_equal(tl.at(260), [7, 2])
    np.testing.assert_array_equal(tl.at(301), [9, 9])
