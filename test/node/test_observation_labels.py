"""CategoricalObservation.label and refusals made before admission (a sensor adapter's), without a ROS graph:
a level given by its name, the precedence and consistency rules with ``level``, and the counters."""
from __future__ import annotations

import numpy as np

from bayes_infer_ros.node.admission import Inputs, report
from bayes_infer_ros.node.conversion import REJECT_REASONS, label_level, observation_to_distribution

LABELS = ["dock", "aisle_a", "aisle_b", "charger", "none"]


def test_a_label_gives_the_level_by_name():
    assert label_level("", 3, LABELS) == (3, None, "")             # no label: level decides
    assert label_level("aisle_b", 0, LABELS)[:2] == (2, None)       # level left at its default 0
    assert label_level("aisle_b", 2, LABELS)[:2] == (2, None)       # both name the same level
    assert label_level("dock", 0, LABELS)[:2] == (0, None)
    check = observation_to_distribution(0, [0.2, 0.8], 5, "charger", LABELS)  # probabilities ignored
    np.testing.assert_array_equal(check.distribution, [0, 0, 0, 1, 0])


def test_an_unknown_or_contradicting_label_is_refused():
    for label, level, reason in [("kitchen", 0, "unknown_label"), ("Dock", 0, "unknown_label"),
                                 ("aisle_b", 1, "label_mismatch"), ("aisle_b", -1, "label_mismatch")]:
        check = observation_to_distribution(level, [], 5, label, LABELS)
        assert not check.ok and check.reason == reason and check.reason in REJECT_REASONS, (label, level, check)
        assert repr(label) in check.detail


def test_inputs_count_label_and_adapter_refusals_like_any_other():
    inputs = Inputs(["rfid_tag", "door"], [5, 2], [LABELS, ["open", "closed"]])
    kw = dict(now=1.0, now_ns=0, arrival=0.0, timeout_s=0.0, max_future_s=0.5)
    assert inputs.observe(0, 0, (), 0, 0, label="charger", **kw).ok
    row, _, _ = inputs.take()
    np.testing.assert_array_equal(row[:5], [0, 0, 0, 1, 0])
    got = inputs.observe(0, 0, (), 0, 0, label="kitchen", **kw)
    assert got.reason == "unknown_label"
    assert report("rfid_tag", got).counters == ("rejected.unknown_label",)
    got = inputs.observe(1, 0, (), 0, 0, refused=("out_of_bins", "voltage = 31 is outside the bins"), **kw)
    assert got.reason == "out_of_bins" and inputs.modalities[1].rejected == {"out_of_bins": 1}
    assert report("door", got).counters == ("rejected.out_of_bins",)
    assert inputs.modalities[0].rejected == {"unknown_label": 1} and inputs.modalities[0].accepted == 1
    assert not inputs.any_fresh  # nothing refused was stored
    # without labels (a model without them), the level indices are the labels
    assert Inputs(["x"], [2]).observe(0, 0, (), 0, 0, label="1", **kw).ok
