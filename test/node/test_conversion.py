"""node/conversion.py: an observation message to a distribution (a one-hot level, probabilities renormalised and
flagged, every refusal with its reason), the no-evidence fill of a silent modality, and the summary published with
each factor's belief."""
from __future__ import annotations

import math

import numpy as np
import pytest

from bayes_infer_ros.node import conversion as conv
from tolerances import FLOAT32_STORAGE_ATOL, ROS_FLOAT32_ATOL


def test_level_is_one_hot():
    c = conv.observation_to_distribution(2, [], 4)
    assert c.ok and c.distribution.dtype == np.float32
    np.testing.assert_array_equal(c.distribution, [0, 0, 1, 0])


def test_level_wins_over_probabilities():
    c = conv.observation_to_distribution(0, [0.1, 0.9], 2)
    np.testing.assert_array_equal(c.distribution, [1, 0])


@pytest.mark.parametrize("level,probs,m,reason", [
    (4, [], 4, "level_out_of_range"),
    (-2, [], 4, "level_out_of_range"),
    (-1, [0.5, 0.5], 4, "wrong_length"),
    (-1, [], 3, "wrong_length"),
    (-1, [math.nan, 0.5, 0.5], 3, "non_finite"),
    (-1, [math.inf, 0.0, 0.0], 3, "non_finite"),
    (-1, [-0.1, 0.6, 0.5], 3, "negative"),
    (-1, [0.0, 0.0, 0.0], 3, "all_zero"),
])
def test_bad_observations_are_refused_with_a_reason(level, probs, m, reason):
    c = conv.observation_to_distribution(level, probs, m)
    assert not c.ok and c.reason == reason and c.detail
    assert reason in conv.REJECT_REASONS


def test_probabilities_renormalised_and_flagged():
    c = conv.observation_to_distribution(-1, [1.0, 1.0, 2.0], 3)
    assert c.ok and c.renormalized
    np.testing.assert_allclose(c.distribution, [0.25, 0.25, 0.5], atol=FLOAT32_STORAGE_ATOL)
    c = conv.observation_to_distribution(-1, np.float32([0.2, 0.3, 0.5]), 3)
    assert c.ok and not c.renormalized
    assert abs(float(c.distribution.sum()) - 1) < ROS_FLOAT32_ATOL


def test_a_missing_observation_adds_nothing_to_pymdps_log_likelihood():
    """pymdp's log-likelihood is xlogy(o, clip(A, MINVAL)).sum(0): the no-evidence fill adds exactly 0, a uniform
    vector would add the mean of log A, which differs between states."""
    from jax.scipy.special import xlogy

    A = np.random.default_rng(0).random((3, 4))
    A /= A.sum(0)
    ll = np.asarray(xlogy(conv.no_evidence(3)[:, None], np.clip(A, np.finfo(float).eps, None)).sum(0))
    np.testing.assert_array_equal(ll, np.zeros(4))
    uniform_ll = np.asarray(xlogy(np.full((3, 1), 1 / 3), A).sum(0))
    assert np.ptp(uniform_ll) > 0.1


def test_belief_summary_names_the_mode_and_the_entropy():
    index, entropy = conv.belief_summary(np.float32([0.1, 0.6, 0.3]))
    assert index == 1
    assert abs(entropy - float(-(0.1 * np.log(0.1) + 0.6 * np.log(0.6) + 0.3 * np.log(0.3)))) < ROS_FLOAT32_ATOL
    assert conv.belief_summary(np.float32([0.0, 1.0, 0.0])) == (1, 0.0)   # certain: 0 (0 log 0 = 0)
    index, entropy = conv.belief_summary(np.full(4, 0.25, np.float32))
    assert index == 0 and abs(entropy - np.log(4)) < ROS_FLOAT32_ATOL                 # tie: the first
