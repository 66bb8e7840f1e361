"""The V-A generator: grid, regimes, dependency lists, determinism, cache round trip."""
import math

import numpy as np
import pytest

from lab import generator as g
from tolerances import FLOAT32_ATOL


@pytest.fixture(scope="module")
def specs():
    return g.generate_specs()


def test_grid_and_count(specs):
    combos = g.combinations()
    assert len(combos) == 180  # 10 (F, M) pairs with F <= M x 3 x 3 upper limits x 2 regimes
    assert len(specs) == 900 == 180 * g.SAMPLES_PER_COMBINATION
    assert all(s.F <= s.M for s in specs)
    assert len({s.config_id for s in specs}) == 900


def test_dimensions_respect_limits_and_regimes(specs):
    for s in specs:
        assert len(s.num_states) == s.F and len(s.num_obs) == s.M
        assert all(2 <= n <= s.state_upper for n in s.num_states)
        assert all(2 <= m <= s.obs_upper for m in s.num_obs)
    skewed = [s for s in specs if s.regime == "skewed" and s.state_upper == 25]
    for s in skewed:
        dims = np.array(s.num_states)
        assert set(dims) <= set(range(2, 5)) | set(range(23, 26))
        assert (dims >= 23).sum() == max(1, round(s.F / 5))


def test_dependency_lists(specs):
    lengths = []
    for s in specs:
        covered = {f for d in s.A_dependencies for f in d}
        assert covered == set(range(s.F)), s.config_id
        for d in s.A_dependencies:
            assert 1 <= len(d) <= min(10, s.F)
            assert len(set(d)) == len(d) and list(d) == sorted(d)
            lengths.append(len(d))
        assert max(s.a_elements()) <= g.DEFAULT_MAX_A_ELEMENTS
    hist = np.bincount(lengths)
    assert hist[1] > hist[2] > hist[3] > hist[5] > hist[8]  # exponential prior favours short lists
    # negative correlation between list length and the dimensions in it
    pairs = [(len(d), np.mean([s.num_states[f] for f in d])) for s in specs for d in s.A_dependencies
             if s.regime == "uniform" and s.state_upper == 25]
    k, n = np.array(pairs).T
    assert np.corrcoef(k, n)[0, 1] < -0.2


@pytest.mark.heavy
def test_deterministic_and_seeded(specs):
    fresh = g._generate_specs.__wrapped__  # bypass the memo: a second, independent run
    one = fresh(0, 1, g.DEFAULT_DEP_RATE, g.DEFAULT_MAX_A_ELEMENTS, g.DEFAULT_NUM_CONTROLS)
    assert one == fresh(0, 1, g.DEFAULT_DEP_RATE, g.DEFAULT_MAX_A_ELEMENTS, g.DEFAULT_NUM_CONTROLS)
    other = fresh(1, 1, g.DEFAULT_DEP_RATE, g.DEFAULT_MAX_A_ELEMENTS, g.DEFAULT_NUM_CONTROLS)
    assert sum(a.num_states != b.num_states for a, b in zip(one, other)) > 100


def test_build_model_normalised_and_cached(specs, tmp_path):
    spec = specs[7]
    m1 = g.build_model(spec)
    m2 = g.load_or_build(spec, tmp_path)
    assert (tmp_path / "npz" / f"{spec.config_id}.npz").is_file()
    m3 = g.load_or_build(spec, tmp_path)  # from the npz
    for a1, a2, a3, deps in zip(m1.A, m2.A, m3.A, spec.A_dependencies):
        assert a1.shape == (a1.shape[0],) + tuple(spec.num_states[f] for f in deps)
        np.testing.assert_allclose(a1.sum(0), 1.0, atol=FLOAT32_ATOL)
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(a1, a3)
    for b, u in zip(m1.B, spec.num_controls):
        assert b.shape[-1] == u
        np.testing.assert_allclose(b.sum(0), 1.0, atol=FLOAT32_ATOL)


def test_cli_index_only(tmp_path, capsys):
    assert g.main(["--out", str(tmp_path), "--index-only"]) == 0
    back = g.read_index(tmp_path)
    assert len(back) == 900 and back[0] == g.generate_specs()[0]
    assert "900 configurations" in capsys.readouterr().out


def test_skewed_sampler_bands():
    rng = np.random.default_rng(0)
    d = g.sample_dimensions(rng, 10, 25, "skewed")
    assert sorted(d)[-2:] and (d >= 23).sum() == 2 and (d <= 4).sum() == 8
    assert math.isclose(g.dependency_length_probs(10).sum(), 1.0)
