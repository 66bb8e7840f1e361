"""npz and params-YAML round trips, the shipped default model, and refusal of bad files."""
import numpy as np
import pytest
import yaml

from bayes_infer_ros.model import ModelValidationError, load_model, save_model
from model.test_validation import good, unobserved


@pytest.mark.parametrize("suffix", [".npz", ".yaml"])
def test_round_trip(tmp_path, suffix):
    m = good(3)
    m.state_labels = [["left", "right"], ["a", "b", "c", "d"]]
    m.observation_labels = [["x", "y", "z"], ["on", "off"]]
    path = tmp_path / f"model{suffix}"
    save_model(m, path)
    back = load_model(path)
    assert back.structure == m.structure
    for x, y in zip(m.A + m.B + m.D, back.A + back.B + back.D):
        np.testing.assert_array_equal(x, y)  # float64 -> YAML -> float64 is exact (repr round-trips)
    assert back.factor_names == m.factor_names and back.state_labels == m.state_labels
    assert back.observation_labels == m.observation_labels


@pytest.mark.parametrize("suffix", [".npz", ".yaml"])
@pytest.mark.parametrize("with_B", [True, False])
def test_round_trip_of_a_factor_no_modality_observes(tmp_path, suffix, with_B):
    m = unobserved(with_B=with_B).validate()
    path = tmp_path / f"model{suffix}"
    save_model(m, path)
    back = load_model(path)
    assert back.structure == m.structure and back.num_states == (2, 4)


def test_default_model_is_meaningful(repo_root):
    m = load_model(repo_root / "config" / "agent.yaml")
    assert m.factor_names == ["location", "battery", "door"]
    assert m.modality_names == ["rfid_tag", "voltage", "lidar_gap", "charging"]
    assert m.structure.B_dependencies[1] == (1, 0)  # battery charges at the charger: a non-trivial B-dependency
    assert all(len(labels) == n for labels, n in zip(m.state_labels, m.num_states))


def test_yaml_doubles_are_written_as_floats(repo_root):
    """ROS rejects an integer literal for a double[] parameter: every data entry must parse as float."""
    doc = yaml.safe_load((repo_root / "config" / "agent.yaml").read_text())
    model = doc["/**"]["ros__parameters"]["model"]
    for group in ("A", "B"):
        for entry in model[group].values():
            assert all(isinstance(v, float) for v in entry["data"])


@pytest.mark.parametrize("content,pattern", [
    ("not: [valid", "not valid YAML"),
    ("just a string", "expected a mapping"),
    ("/**:\n  other: 1\n", "no '/\\*\\*: ros__parameters:' section"),
])
def test_malformed_yaml_refused(tmp_path, content, pattern):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ModelValidationError, match=pattern) as info:
        load_model(path)
    assert info.value.field == "model_file"


def test_missing_and_unknown_files_refused(tmp_path):
    with pytest.raises(ModelValidationError, match="does not exist"):
        load_model(tmp_path / "nope.npz")
    (tmp_path / "m.txt").write_text("x")
    with pytest.raises(ModelValidationError, match="unknown format"):
        load_model(tmp_path / "m.txt")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelValidationError, match="not a bayes_infer_ros model npz"):
        load_model(tmp_path / "junk.npz")
