"""Hostile model files: labels YAML reads as non-strings, alias bombs, oversized files and tensors. Each is
refused before it costs memory, with a message naming the label / tensor / file."""
import numpy as np
import pytest
import yaml

from bayes_infer_ros.model import ModelValidationError, load_model, model_to_parameters, save_model
from bayes_infer_ros.model import limits
from bayes_infer_ros.model.io import unflatten_parameters
from model.test_validation import good


def _params_file(path, flat):
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": unflatten_parameters(flat)}}, sort_keys=False))
    return path


def test_yaml_boolean_labels_are_refused_naming_the_label(tmp_path):
    m = good(3)
    flat = model_to_parameters(m)
    factor = m.factor_name(0)
    flat[f"model.states.{factor}"] = ["x", "y"]
    for f in range(1, m.num_factors):
        flat[f"model.states.{m.factor_name(f)}"] = [f"s{k}" for k in range(m.num_states[f])]
    text = yaml.safe_dump({"/**": {"ros__parameters": unflatten_parameters(flat)}}, sort_keys=False)
    text = text.replace("- x\n", "- on\n").replace("- y\n", "- off\n")  # YAML 1.1: booleans
    path = tmp_path / "bool_labels.yaml"
    path.write_text(text)
    with pytest.raises(ModelValidationError, match=r"model\.states\.\w+\[0\].*boolean.*quote it") as info:
        load_model(path)
    assert info.value.field == f"model.states.{factor}[0]"


def test_integer_labels_become_strings_in_yaml_and_npz(tmp_path):
    m = good(3)
    m.state_labels = [list(range(n)) for n in m.num_states]
    m.observation_labels = [[10 * k for k in range(o)] for o in m.num_obs]
    for suffix in (".yaml", ".npz"):
        path = tmp_path / f"int_labels{suffix}"
        save_model(m, path)
        back = load_model(path)
        assert back.state_labels == [[str(k) for k in range(n)] for n in m.num_states]
        assert back.observation_labels == [[str(10 * k) for k in range(o)] for o in m.num_obs]
        assert all(isinstance(x, str) for row in back.state_labels + back.observation_labels for x in row)


def test_npz_float_label_refused(tmp_path):
    m = good(3)
    m.state_labels = [[0.5] * n for n in m.num_states]
    path = tmp_path / "float_labels.npz"
    save_model(m, path)
    with pytest.raises(ModelValidationError, match=r"state_labels\[0\]\[0\].*float"):
        load_model(path)


def test_validation_refuses_non_string_labels():
    m = good(3)
    m.state_labels = [[True, False]] + [[str(k) for k in range(n)] for n in m.num_states[1:]]
    with pytest.raises(ModelValidationError, match=r"state_labels\[0\]\[0\].*bool"):
        m.validate()


def test_yaml_alias_bomb_refused_before_expansion(tmp_path):
    lines = ["a0: &a0 [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]"]
    for i in range(1, 12):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")  # 10^12 values once expanded
    path = tmp_path / "bomb.yaml"
    path.write_text("/**:\n  ros__parameters:\n    model:\n" + "\n".join("      " + x for x in lines) + "\n")
    assert path.stat().st_size < 4096
    with pytest.raises(ModelValidationError, match=r"alias \*a0 .*refused") as info:
        load_model(path)
    assert info.value.field == "model_file"


def test_yaml_scalar_count_limit():
    with pytest.raises(ModelValidationError, match="more than 100 values"):
        limits.safe_load_strict("x: [" + ", ".join(["1"] * 101) + "]", max_scalars=100)
    assert limits.safe_load_strict("x: [1, 2]", max_scalars=100) == {"x": [1, 2]}


def test_oversized_files_refused_before_reading(tmp_path):
    big_yaml = tmp_path / "big.yaml"
    with open(big_yaml, "wb") as f:
        f.truncate(limits.MAX_YAML_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ModelValidationError, match=r"MiB, more than the limit"):
        load_model(big_yaml)
    big_npz = tmp_path / "big.npz"
    with open(big_npz, "wb") as f:
        f.truncate(limits.MAX_FILE_BYTES + 1)
    with pytest.raises(ModelValidationError, match=r"MiB, more than the limit"):
        load_model(big_npz)


def test_npz_of_zeros_refused_from_its_header(tmp_path, monkeypatch):
    """A compressed npz of zeros is tiny on disk: it is refused from its .npy headers, naming the array, before
    anything is decompressed (the limit is lowered here so the file stays small)."""
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 10_000)
    m = good(3)
    m.A[0] = np.zeros((3, 2, 2000))  # 12000 elements: the structure is wrong too, but the size is checked first
    m.A_dependencies = ((0, 0),) + tuple(m.A_dependencies[1:])
    path = tmp_path / "zeros.npz"
    save_model(m, path)
    assert path.stat().st_size < 10_000
    with pytest.raises(ModelValidationError, match=r"A_0: shape \[3, 2, 2000\] holds 1.2e\+04 elements, more than the limit"):
        load_model(path)
    # the whole model counts: several arrays under the limit each, over it together
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 12)
    with pytest.raises(ModelValidationError, match="more than the limit of 12"):
        save_model(good(3), tmp_path / "small.npz")
        load_model(tmp_path / "small.npz")


def test_huge_shape_names_the_tensor(tmp_path):
    flat = model_to_parameters(good(3))
    key = f"model.A.{good(3).modality_name(0)}"
    flat[f"{key}.shape"] = [2**32, 2**32]
    flat[f"{key}.data"] = [0.5]
    with pytest.raises(ModelValidationError, match=r"shape \[4294967296, 4294967296\] holds 1.84e\+19 elements") as info:
        load_model(_params_file(tmp_path / "huge.yaml", flat))
    assert info.value.field == f"{key}.shape"


def _nested_params_file(path, depth: int):
    """A params file whose model.A.x holds ``depth`` nested lists (2 bytes a level)."""
    path.write_text("/**:\n  ros__parameters:\n    model:\n      A:\n        x: " + "[" * depth + "]" * depth + "\n")
    return path


@pytest.mark.heavy
def test_deeply_nested_yaml_is_refused_naming_the_depth_and_the_limit(tmp_path):
    """30,000 nested lists (60 KB) used to overflow libyaml's recursive loader (SIGSEGV): refused while the
    events stream, naming the depth and the limit."""
    path = _nested_params_file(tmp_path / "deep.yaml", 30_000)
    assert path.stat().st_size < 100_000
    with pytest.raises(ModelValidationError, match=r"nested 30005 deep .*the limit for a model is 100 levels") as info:
        load_model(path)
    assert info.value.field == "model_file"
    with pytest.raises(ModelValidationError, match=r"nested 4 deep \(deeper than 3 from line 1\)"):
        limits.safe_load_strict("x: [[[1]]]", max_depth=3)
    assert limits.safe_load_strict("x: [[1]]", max_depth=3) == {"x": [[1]]}


@pytest.mark.heavy
def test_model_validate_refuses_a_deeply_nested_file_without_crashing(tmp_path):
    """``bayes-infer model validate`` in its own process: a clear message and exit 1, not SIGSEGV (139)."""
    import subprocess
    import sys

    path = _nested_params_file(tmp_path / "deep.yaml", 30_000)
    run = subprocess.run([sys.executable, "-m", "bayes_infer_ros.cli", "model", "validate", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, (run.returncode, run.stderr[-2000:])
    assert "nested 30005 deep" in run.stdout + run.stderr and "limit for a model is 100" in run.stdout + run.stderr
