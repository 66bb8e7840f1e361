"""The one decision (``autotune.decide``): devices and the GPU self-test, (device, variant) candidates, the verify
step across devices, the kept decisions, the memory budget. This machine has no GPU: a "GPU" here is either a
faked failure of the real lookup or a second JAX CPU device standing in for one (labelled "gpu"), which is what
the policy sees of a device: a name, a self-test, and timings."""
from pathlib import Path

import jax
import pytest

from bayes_infer_ros.autotune import decision as dec
from bayes_infer_ros.autotune import devices
from bayes_infer_ros.autotune.budget import MemoryBudget, MemoryBudgetExceeded
from bayes_infer_ros.autotune.decision_cache import DecisionCache
from bayes_infer_ros.inference import VariantUnsupported
from bayes_infer_ros.inference.native import numba_available
from bayes_infer_ros.model import load_model
from engine_stubs import Broken, Slowed

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
def test_cpu_only_machine_runs_on_the_cpu_and_says_why(model):
    decision = dec.decide(model, dec.EngineConfig("fpi"), BUDGET, cache=None)
    assert decision.device == "cpu:0" and decision.platform == "cpu"
    assert "no GPU" in decision.reason
    if numba_available():
        assert decision.variant == "fused_numba"


def test_device_gpu_without_a_gpu_is_refused_with_the_reason(model):
    with pytest.raises(devices.DeviceUnavailable, match="device: gpu: no GPU"):
        dec.decide(model, dec.EngineConfig("fpi", device="gpu"), BUDGET)


def test_a_gpu_that_fails_its_self_test_falls_back_to_the_cpu(model, broken_gpu):
    found = devices.find_devices("auto")
    assert list(found.by_platform) == ["cpu"]
    assert "self-test failed" in found.note and "no kernel image" in found.note
    decision = dec.decide(model, dec.EngineConfig("fpi"), BUDGET)
    assert decision.platform == "cpu" and "no kernel image" in decision.reason
    with pytest.raises(devices.DeviceUnavailable, match="self-test failed.*no kernel image"):
        dec.decide(model, dec.EngineConfig("fpi", device="gpu"), BUDGET)


def test_a_working_gpu_passes_the_self_test(fake_gpu):
    found = devices.find_devices("auto")
    assert set(found.by_platform) == {"cpu", "gpu"} and found.note == ""
    assert list(devices.find_devices("gpu").by_platform) == ["gpu"]
    assert list(devices.find_devices("cpu").by_platform) == ["cpu"]
    with pytest.raises(ValueError, match="device: expected one of"):
        devices.find_devices("tpu")


# ---- candidates and the verify step across devices ---------------------------------------------------------
def test_candidates_are_device_variant_pairs(model):
    pool = dec.candidates(model, dec.EngineConfig("fpi"), BUDGET, ["cpu", "gpu"], untrained=True)
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


@pytest.mark.parametrize("slow", ["cpu", "gpu"])
def test_auto_runs_the_measured_fastest_device(model, monkeypatch, slow):
    """Whichever device's candidates are slowed, the decision runs on the other one: ``device: auto`` is the
    measured fastest (device, variant), and never slower than the baseline on the first device."""
    cpu = jax.devices("cpu")[0]

    class Stand:  # a distinct device object for the "gpu", so the builder knows which candidate it builds
        platform, id = "gpu", 0

    gpu = Stand()
    found = devices.Devices({"cpu": cpu, "gpu": gpu})
    real = dec.build_engine

    def build(m, config, variant, device):
        engine = real(m, config, variant, cpu)
        platform = "gpu" if device is gpu else "cpu"
        return Slowed(engine, 0.005) if platform == slow else engine

    monkeypatch.setattr(dec, "build_engine", build)
    decision = dec.decide(model, dec.EngineConfig("fpi", autotune_verify_top_k=2), BUDGET, found=found)
    assert decision.device == f"{decision.platform}:0"
    assert decision.platform != slow, decision.reason
    assert set(k.rsplit("@", 1)[1] for k in decision.timings) == {"cpu", "gpu"}
    assert decision.timings[f"{decision.variant}@{decision.platform}"] == min(decision.timings.values())


def test_device_settings_restrict_the_candidates(model, fake_gpu):
    for setting, expected in (("cpu", {"cpu"}), ("gpu", {"gpu"})):
        decision = dec.decide(model, dec.EngineConfig("fpi", device=setting), BUDGET)
        assert {k.rsplit("@", 1)[1] for k in decision.timings} == expected
        assert decision.platform in expected


# ---- kept decisions ---------------------------------------------------------------------------------------
def test_a_kept_decision_is_reused_without_timing(model, tmp_path, monkeypatch):
    cache = DecisionCache(tmp_path / "decisions")
    first = dec.decide(model, dec.EngineConfig("fpi", device="cpu"), BUDGET, cache=cache)
    assert len(list((tmp_path / "decisions").glob("*.json"))) == 1 and cache.warning == ""
    monkeypatch.setattr(dec, "time_round_robin", lambda *a, **k: pytest.fail("a kept decision was timed again"))
    again = dec.decide(model, dec.EngineConfig("fpi", device="cpu"), BUDGET, cache=cache)
    assert (again.device, again.variant) == (first.device, first.variant) and "decision cache" in again.reason
    # another setting is another key: timed again
    with pytest.raises(pytest.fail.Exception, match="timed again"):
        dec.decide(model, dec.EngineConfig("fpi", num_iter=8, device="cpu"), BUDGET, cache=cache)


def test_an_unwritable_decision_cache_is_a_warning(model, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    cache = DecisionCache(blocker / "decisions")  # a folder under a regular file: never writable, even for root
    decision = dec.decide(model, dec.EngineConfig("fpi", device="cpu"), BUDGET, cache=cache)
    assert decision.engine is not None
    assert len(decision.warnings) == 1 and "not writable" in decision.warnings[0]
    assert "BAYES_INFER_DECISION_CACHE" in decision.warnings[0]


# ---- the memory budget ---------------------------------------------------------------------------------------
def test_one_budget_in_bytes_names_its_setting(model):
    assert MemoryBudget.from_mib(2048, "memory_budget_mb").bytes == MemoryBudget.from_gib(2.0).bytes == 2**31
    tiny = MemoryBudget.from_mib(1e-6, "memory_budget_mb")
    with pytest.raises(MemoryBudgetExceeded, match=r"over memory_budget_mb 1e-06 \(1 B\)"):
        dec.decide(model, dec.EngineConfig("fpi", "hybrid", device="cpu"), tiny)
    # auto: nothing fits, the baseline runs every model
    assert dec.decide(model, dec.EngineConfig("fpi", device="cpu"), tiny).variant == "baseline"


# ---- the node's build: the self-test's fallback reaches the slot it runs --------------------------------------
def test_the_nodes_build_falls_back_from_a_broken_gpu_with_the_reason(model, broken_gpu, tmp_path):
    from bayes_infer_ros.node.builder import build_slot

    cache = DecisionCache(tmp_path)
    slot = build_slot(model, dec.EngineConfig("fpi", device="auto"), 0, 2048.0, cache=cache)
    assert slot.device == "cpu:0" and slot.engine.device == "cpu"
    assert "self-test failed" in slot.note and "no kernel image" in slot.note  # /diagnostics' variant_note
    with pytest.raises(devices.DeviceUnavailable, match="no kernel image"):
        build_slot(model, dec.EngineConfig("fpi", device="gpu"), 0, 2048.0, cache=cache)


# ---- a GPU only numba can use, and candidates that do not run ---------------------------------------------
def test_a_gpu_only_numba_sees_runs_only_the_native_gpu_engines(model, monkeypatch):
    """JAX has no GPU (a CPU-only jaxlib on a Jetson) but numba's CUDA target has one: the GPU's candidates are the
    native GPU engines alone, never a JAX program placed on it."""
    from bayes_infer_ros.inference.native import CudaEngine

    monkeypatch.setattr(CudaEngine, "available", staticmethod(lambda: True))  # numba sees a CUDA device
    found = devices.find_devices("auto")
    assert isinstance(found.by_platform["gpu"], devices.NumbaCudaDevice) and "fused_cuda" in found.note
    pool = dec.candidates(model, dec.EngineConfig("fpi"), BUDGET, list(found.by_platform), untrained=True,
                          native_only=["gpu"])
    assert [c.variant for c in pool if c.platform == "gpu"] == ["fused_cuda"]
    assert dec.candidates(model, dec.EngineConfig("fpi", "hybrid"), BUDGET, ["cpu", "gpu"], native_only=["gpu"]) == [
        dec.Candidate("cpu", "hybrid")]


def test_a_candidate_that_fails_its_first_call_drops_out_with_the_reason(model, monkeypatch):
    """A kernel that cannot compile for this device fails at its first call: the verify step times the others and
    says why that one did not run, instead of failing the configure."""
    cpu = jax.devices("cpu")[0]
    real = dec.build_engine

    def build(m, config, variant, device):
        engine = real(m, config, variant, cpu)
        return Broken(engine, RuntimeError("NvvmSupportError: libNVVM cannot be found")) if variant != "baseline" else engine

    monkeypatch.setattr(dec, "build_engine", build)
    decision = dec.decide(model, dec.EngineConfig("fpi"), BUDGET, found=devices.Devices({"cpu": cpu}))
    assert decision.variant == "baseline" and decision.engine is not None
    assert "did not run (RuntimeError: NvvmSupportError" in decision.reason
    assert all(t == float("inf") for name, t in decision.timings.items() if not name.startswith("baseline"))
