"""The XLA flags the engine adds: a user's own setting wins, nothing is duplicated."""
from bayes_infer_ros.inference.xla_config import DEFAULT_BACKEND_OPTIONS, merged_flags

KEY = "xla_cpu_small_while_loop_byte_threshold"


def test_adds_the_option_when_absent():
    out = merged_flags("")
    assert out == f"--xla_backend_extra_options={KEY}={DEFAULT_BACKEND_OPTIONS[KEY]}"


def test_appends_to_existing_backend_options_and_keeps_other_flags():
    out = merged_flags("--xla_dump_to=/tmp/x --xla_backend_extra_options=foo=1")
    assert out == f"--xla_dump_to=/tmp/x --xla_backend_extra_options=foo=1,{KEY}={DEFAULT_BACKEND_OPTIONS[KEY]}"


def test_user_value_wins():
    mine = f"--xla_backend_extra_options={KEY}=7"
    assert merged_flags(mine) == mine


# ---- per-program compile options ------------------------------------------------------------------------------
import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bayes_infer_ros.inference import xla_config  # noqa: E402


class _Device:
    platform = "gpu"


def test_cpu_programs_compile_with_the_classic_emitters(monkeypatch):
    monkeypatch.delenv(xla_config.FUSION_EMITTERS, raising=False)
    assert xla_config.compile_options(jax.devices("cpu")[0]) == xla_config.CPU_COMPILE_OPTIONS
    assert xla_config.compile_options(_Device()) is None  # a GPU compiles with XLA's defaults


def test_the_environment_keeps_xlas_default(monkeypatch):
    monkeypatch.setenv(xla_config.FUSION_EMITTERS, "1")
    assert xla_config.compile_options(jax.devices("cpu")[0]) is None


def test_an_option_this_jaxlib_does_not_know_is_left_out():
    """The probe compiles with the option and falls back on the error (as JAX 0.11, without this option, does)."""
    assert xla_config._accepted("cpu", (("xla_no_such_option_anywhere", True),)) is False
    assert xla_config._accepted("cpu", tuple(sorted(xla_config.CPU_COMPILE_OPTIONS.items()))) is True


def test_the_engine_passes_them_to_its_programs(monkeypatch):
    """Every jitted program of a JAX engine carries the options (read off the lowering: a private field of jax)."""
    from bayes_infer_ros.inference import build_inference

    monkeypatch.delenv(xla_config.FUSION_EMITTERS, raising=False)
    A = [np.full((2, 3), 0.5, np.float32)]
    B = [np.stack([np.eye(3, dtype=np.float32)] * 2, axis=-1)]
    engine = build_inference("fpi", A, [[0]], B, [[0]], variant="fused_pairwise", num_iter=4)
    lowered = engine.lower([np.array([1.0, 0.0], np.float32)], [np.full(3, 1 / 3, np.float32)])
    kvs = getattr(lowered._lowering, "_compiler_options_kvs", None)
    if kvs is None:
        pytest.skip("this jax keeps a lowering's compile options elsewhere")
    assert dict(kvs) == xla_config.CPU_COMPILE_OPTIONS


@pytest.mark.parametrize("algorithm", ["fpi", "vmp"])
@pytest.mark.parametrize("variant", ["baseline", "hybrid_block", "fused_pairwise"])
def test_every_dot_of_an_engine_program_is_full_precision(algorithm, variant):
    """On a GPU a float32 dot at the default precision rounds its operands to TF32; the engines' dots say HIGHEST."""
    import re

    from bayes_infer_ros.inference import build_inference

    rng = np.random.default_rng(3)
    A = [rng.dirichlet(np.ones(2), size=(3, 2)).transpose(2, 0, 1).astype(np.float32),
         rng.dirichlet(np.ones(3), size=(3, 2)).transpose(2, 0, 1).astype(np.float32)]
    B = [np.stack([np.eye(3, dtype=np.float32)] * 2, axis=-1), np.stack([np.eye(2, dtype=np.float32)] * 2, axis=-1)]
    engine = build_inference(algorithm, A, [[0, 1], [0, 1]], B, [[0], [1]], variant=variant, num_iter=3)
    T = 1 if algorithm == "fpi" else 3
    obs = [np.eye(a.shape[0], dtype=np.float32)[np.zeros(T, int)] for a in A]
    obs = [o[0] for o in obs] if T == 1 else obs
    prior = [np.full(n, 1.0 / n, np.float32) for n in (3, 2)]
    actions = None if T == 1 else np.zeros((T - 1, 2), np.int32)
    dots = re.findall(r"stablehlo\.dot_general.*", engine.lower(obs, prior, actions).as_text())
    assert dots, "the program has no dot to check"
    assert all("HIGHEST" in d for d in dots), [d for d in dots if "HIGHEST" not in d][:2]


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ["fpi", "vmp"])
def test_the_pymdp_oracle_runs_at_the_engines_precision(algorithm):
    """pymdp's programs, as the lab runs them (the oracle, the benchmarks' pymdp), carry the engines' precision: on
    a GPU the oracle itself would otherwise round to TF32."""
    import re

    pymdp_oracle = pytest.importorskip("lab.pymdp_oracle")
    rng = np.random.default_rng(4)
    A = [rng.dirichlet(np.ones(2), size=(3, 2)).transpose(2, 0, 1).astype(np.float32)]
    B = [np.stack([np.eye(3, dtype=np.float32)] * 2, axis=-1), np.stack([np.eye(2, dtype=np.float32)] * 2, axis=-1)]
    prior = [np.full(n, 1.0 / n, np.float32) for n in (3, 2)]
    T = 1 if algorithm == "fpi" else 3
    obs = [np.eye(2, dtype=np.float32)[np.zeros(T, int)]]
    obs = [o[0] for o in obs] if T == 1 else obs
    program = pymdp_oracle.program(algorithm, ((0, 1),), ((0,), (1,)), 3)
    text = program.lower(A, B, obs, prior, np.zeros((T - 1, 2), np.int32)).as_text()
    dots = re.findall(r"stablehlo\.dot_general.*", text)
    assert dots, "the program has no dot to check"
    assert all("HIGHEST" in d for d in dots), [d for d in dots if "HIGHEST" not in d][:2]
