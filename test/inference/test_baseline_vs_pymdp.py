"""The baseline engine against pymdp 1.0.4 on fresh seeded random models (float32 and float64)."""
import zlib

import numpy as np
import pytest

from bayes_infer_ros.inference import ALGORITHMS, build_inference
from conftest import enable_x64
from oracle import max_abs_diff, pymdp_reference, random_case, unbatch
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL

# (id, num_states, A_deps, num_obs, B_deps)
STRUCTURES = [
    ("one_factor", (4,), [[0], [0], [0]], (3, 5, 2), None),
    ("one_modality", (3, 4), [[0, 1]], (6,), None),
    ("wide_modality_7_factors", (2, 3, 2, 2, 3, 2, 2), [[0, 1, 2, 3, 4, 5, 6], [1], [4, 6]], (4, 3, 5), None),
    ("skewed_dims", (12, 2, 2, 9), [[0], [1, 2], [0, 3], [2, 1, 3]], (2, 11, 3, 2), None),
    ("B_dependencies", (3, 2, 4), [[0, 1], [2], [1, 2]], (3, 4, 2), [[0, 1], [1], [0, 1, 2]]),
    ("single_state_level", (1, 3), [[0, 1], [1]], (2, 3), None),
]


def _check(algorithm, case, num_iter, tau, dtype, valid_steps=None, variant="baseline"):
    engine = build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, variant=variant,
                             num_iter=num_iter, tau=tau)
    got = engine(case.obs, case.prior, case.actions, valid_steps=valid_steps)
    want = pymdp_reference(algorithm, case, num_iter, tau, valid_steps=valid_steps)
    atol = FLOAT64_ATOL if dtype == np.float64 else FLOAT32_ATOL
    assert all(np.asarray(g).dtype == dtype for g in got)
    err = max_abs_diff(got, want)
    assert err <= atol, f"{algorithm}: max |ours - pymdp| = {err:.3g} > {atol}"
    return err


@pytest.mark.oracle
@pytest.mark.parametrize("sid,ns,adeps,nobs,bdeps", STRUCTURES, ids=[s[0] for s in STRUCTURES])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_float32_matches_pymdp(algorithm, sid, ns, adeps, nobs, bdeps):
    seed = zlib.crc32(f"{algorithm}/{sid}".encode())
    T = None if algorithm == "fpi" else 1 + seed % 6  # T in 1..6
    rng = np.random.default_rng(seed)
    case = random_case(seed, ns, adeps, nobs, B_deps=bdeps, T=T, one_hot=bool(rng.integers(2)),
                       zeros_fraction=0.3 if sid == "skewed_dims" else 0.0, negative_actions=True)
    _check(algorithm, case, num_iter=int(rng.integers(1, 17)), tau=float(rng.choice([1.0, 0.5, 0.8])), dtype=np.float32)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("sid", ["wide_modality_7_factors", "B_dependencies", "one_factor"])
def test_float64_matches_pymdp(algorithm, sid):
    _, ns, adeps, nobs, bdeps = next(s for s in STRUCTURES if s[0] == sid)
    with enable_x64():
        case = random_case(7, ns, adeps, nobs, B_deps=bdeps, T=None if algorithm == "fpi" else 4,
                           zeros_fraction=0.2, dtype=np.float64)
        _check(algorithm, case, num_iter=12, tau=0.8, dtype=np.float64)
        # tau > 1 (over-relaxed mirror descent) amplifies rounding: float64 only, moderate tau; see tolerances.py
        _check(algorithm, case, num_iter=16, tau=1.1, dtype=np.float64)


@pytest.mark.oracle
@pytest.mark.parametrize("T", [1, 2, 3, 6])
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
def test_window_lengths_and_valid_steps(algorithm, T):
    """T = 1..6, and pymdp's valid_steps masks (a fixed window partly filled, as the node runs it)."""
    case = random_case(100 + T, (3, 2), [[0], [0, 1]], (4, 3), T=T, num_controls=(2, 3))
    _check(algorithm, case, num_iter=5, tau=1.0, dtype=np.float32)
    for k in range(1, T + 1):
        _check(algorithm, case, num_iter=5, tau=1.0, dtype=np.float32, valid_steps=k)


@pytest.mark.oracle
@pytest.mark.parametrize("num_iter", [1, 2, 16])
def test_fpi_num_iter(num_iter):
    case = random_case(num_iter, (3, 4, 2), [[0, 1], [1, 2], [2]], (3, 2, 5))
    _check("fpi", case, num_iter=num_iter, tau=1.0, dtype=np.float32)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_batched_matches_pymdp_per_model(algorithm):
    """A leading batch axis on A/obs/prior/actions runs b models of one structure at once."""
    b = 3
    case = random_case(42, (3, 2, 2), [[0, 1], [2], [0, 1, 2]], (4, 2, 3), B_deps=[[0], [0, 1], [2]],
                       T=None if algorithm == "fpi" else 3, batch=b, num_controls=(2, 1, 2))
    engine = build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, num_iter=6, tau=0.9)
    assert engine.batch_size == b
    got = engine(case.obs, case.prior, case.actions)
    for k in range(b):
        want = pymdp_reference(algorithm, unbatch(case, k), 6, 0.9)
        assert max_abs_diff([g[k] for g in got], want) <= FLOAT32_ATOL


def test_no_b_sequence_matches_pymdp():
    """B=None (static states): pymdp's run_vmp/run_mmp accept it; so do we."""
    case = random_case(5, (3, 2), [[0], [0, 1]], (2, 3), T=3)
    case.B = None
    for algorithm in ("vmp", "mmp"):
        _check(algorithm, case, num_iter=4, tau=1.0, dtype=np.float32)


@pytest.mark.parametrize("algorithm", ["fpi", "mmp"])
def test_second_call_never_retraces(algorithm):
    """Same shapes -> no new trace, for the list and the packed API (two programs, each traced once: the list call
    packs its arrays and runs the packed program with the per-factor split inside it); valid_steps values share one
    program."""
    T = None if algorithm == "fpi" else 4
    case = random_case(11, (3, 2), [[0, 1], [1]], (3, 2), T=T, num_controls=(2, 1))
    engine = build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, num_iter=3)
    packed_obs, packed_prior = engine.layout.pack_obs(case.obs), engine.layout.pack_states(case.prior)
    engine(case.obs, case.prior, case.actions)
    engine.run_packed(packed_obs, packed_prior, case.actions)
    traces = engine.trace_count
    for _ in range(3):
        engine(case.obs, case.prior, case.actions)
        engine.run_packed(packed_obs, packed_prior, case.actions)
    assert engine.trace_count == traces == 2
    if algorithm != "fpi":
        engine.run_packed(packed_obs, packed_prior, case.actions, valid_steps=1)
        for k in range(1, T + 1):
            engine.run_packed(packed_obs, packed_prior, case.actions, valid_steps=k)
        assert engine.trace_count == traces + 1  # one program for every fill level of the window
