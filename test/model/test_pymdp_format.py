"""``bayes-infer model``: the pymdp .npz convention -> a model the node loads; validate and show."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bayes_infer_ros.model import load_model
from bayes_infer_ros.model.pymdp_format import read_pymdp_npz
from bayes_infer_ros.model.validation import ModelValidationError
from bayes_infer_ros.cli.model import main as model_main

from tolerances import FLOAT64_ATOL


def pymdp_model():
    """Two factors (the second's B depends on both), two modalities, the second on both factors."""
    A = [np.array([[0.8, 0.1, 0.2], [0.2, 0.9, 0.8]]), np.full((2, 3, 2), 0.5)]
    B0 = np.stack([np.eye(3), np.roll(np.eye(3), 1, axis=0)], axis=-1)
    B1 = np.zeros((2, 2, 3, 1))
    B1[0], B1[1] = 0.3, 0.7
    D = [np.array([0.2, 0.3, 0.5]), np.array([0.5, 0.5])]
    return A, [B0, B1], D, [[0], [0, 1]], [[0], [1, 0]]


def save_two_lines(path, A, B, D, A_deps, B_deps, **extra):
    """Exactly the lines docs/your-model.md tells pymdp users to write."""
    np.savez(path, **{f"A{i}": a for i, a in enumerate(A)}, **{f"B{f}": b for f, b in enumerate(B)},
             **{f"D{f}": d for f, d in enumerate(D)},
             A_dependencies=json.dumps(A_deps), B_dependencies=json.dumps(B_deps), **extra)


def test_the_documented_two_lines_round_trip(tmp_path):
    A, B, D, A_deps, B_deps = pymdp_model()
    save_two_lines(tmp_path / "m.npz", A, B, D, A_deps, B_deps)
    model = read_pymdp_npz(tmp_path / "m.npz")
    for got, want in zip(model.A + model.B + model.D, A + B + D):
        np.testing.assert_allclose(got, want, atol=FLOAT64_ATOL)
    assert model.A_dependencies == ((0,), (0, 1)) or [list(d) for d in model.A_dependencies] == A_deps
    assert [list(d) for d in model.B_dependencies] == B_deps


def test_batched_pymdp_agent_arrays_and_names(tmp_path):
    """pymdp 1.x Agent arrays carry a leading batch axis; labels come from the optional `names` entry."""
    A, B, D, A_deps, B_deps = pymdp_model()
    other = [np.full_like(d, 1.0 / d.size) for d in D]
    batched = lambda xs, ys: [np.stack([x, y]) for x, y in zip(xs, ys)]  # noqa: E731
    names = {"factors": ["pos", "mode"], "modalities": ["gps", "lamp"], "states": [["a", "b", "c"], ["on", "off"]],
             "observations": [["near", "far"], ["lit", "dark"]], "controls": [["stay", "go"], ["none"]]}
    save_two_lines(tmp_path / "b.npz", batched(A, A), batched(B, B), batched(D, other), A_deps, B_deps,
                   names=json.dumps(names))
    first, second = read_pymdp_npz(tmp_path / "b.npz"), read_pymdp_npz(tmp_path / "b.npz", batch_index=1)
    np.testing.assert_allclose(first.D[0], D[0])
    np.testing.assert_allclose(second.D[0], other[0])
    assert first.factor_names == ["pos", "mode"] and first.control_labels == [["stay", "go"], ["none"]]
    with pytest.raises(ModelValidationError, match="batch index 2 out of range"):
        read_pymdp_npz(tmp_path / "b.npz", batch_index=2)


def test_defaults_without_dependency_lists_or_D(tmp_path):
    A = [np.full((2, 3, 2), 0.5)]
    B = [np.stack([np.eye(3)], -1), np.stack([np.eye(2)], -1)]
    np.savez(tmp_path / "m.npz", A0=A[0], B0=B[0], B1=B[1])
    model = read_pymdp_npz(tmp_path / "m.npz")
    assert [list(d) for d in model.A_dependencies] == [[0, 1]]  # pymdp: every factor
    np.testing.assert_allclose(model.D[1], [0.5, 0.5])


def test_a_factor_no_modality_observes_is_sized_by_D_without_B(tmp_path):
    """pymdp's test_fpi.py condind model: two factors, one modality on factor 0, no B: D gives factor 1's size."""
    A = [np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.3], [0.1, 0.2, 0.6]])]
    D = [np.array([0.2, 0.3, 0.5]), np.array([0.1, 0.2, 0.3, 0.4])]
    np.savez(tmp_path / "m.npz", A0=A[0], D0=D[0], D1=D[1], A_dependencies=json.dumps([[0]]))
    model = read_pymdp_npz(tmp_path / "m.npz")
    assert model.num_states == (3, 4) and model.B is None
    np.testing.assert_allclose(model.D[1], D[1])


@pytest.mark.parametrize("arrays,field,fragment", [
    ({"A": np.array([np.eye(2), np.eye(3)], dtype=object)}, "file", "object arrays"),
    ({"B0": np.eye(2)[:, :, None]}, "A0", "no A arrays"),
    ({"A0": np.eye(2), "A2": np.eye(2)}, "A1", "missing"),
    ({"A0": np.eye(2), "pA0": np.ones(2)}, "pA0", "unknown key"),
    ({"A0": np.array([[0.5, 0.5], [0.6, 0.5]])}, "A[0]", "sum"),
    ({"A0": np.eye(2), "A_dependencies": np.array("[[0], [1]]")}, "A_dependencies", "list of 1 lists"),
])
def test_bad_exports_name_the_key_and_the_problem(tmp_path, arrays, field, fragment):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(ModelValidationError) as err:
        read_pymdp_npz(path)
    assert err.value.field.startswith(field) and fragment in str(err.value), str(err.value)


def test_cli_from_pymdp_validate_show(tmp_path, capsys):
    A, B, D, A_deps, B_deps = pymdp_model()
    save_two_lines(tmp_path / "m.npz", A, B, D, A_deps, B_deps)
    for out in ("m.yaml", "m2.npz"):
        assert model_main(["from-pymdp", str(tmp_path / "m.npz"), "-o", str(tmp_path / out),
                           "--factors", "pos,mode", "--modalities", "gps,lamp"]) == 0
        assert model_main(["validate", str(tmp_path / out)]) == 0
        model = load_model(tmp_path / out)
        np.testing.assert_allclose(model.B[1], B[1], atol=FLOAT64_ATOL)
    assert model_main(["from-pymdp", str(tmp_path / "m.npz"), "-o", str(tmp_path / "m.yaml")]) == 2  # no clobber
    capsys.readouterr()
    assert model_main(["show", str(tmp_path / "m.yaml")]) == 0
    shown = capsys.readouterr().out
    for needle in ("2 factors, 2 modalities", "0: pos  3 states", "B shape (2, 2, 3, 1) depends on ['mode', 'pos']",
                   "1: lamp  2 levels", "A shape (2, 3, 2) depends on ['pos', 'mode']"):
        assert needle in shown, shown


def test_cli_validate_names_the_tensor_and_exits_non_zero(tmp_path, capsys, repo_root):
    assert model_main(["validate", str(repo_root / "config" / "agent.yaml")]) == 0
    text = (repo_root / "config" / "agent.yaml").read_text()
    broken = tmp_path / "broken.yaml"
    broken.write_text(text.replace("data: [0.8, 0.15, 0.05, 0.15, 0.7, 0.2, 0.05, 0.15, 0.75]",
                                   "data: [0.8, 0.15, 0.05, 0.15, 0.7, 0.2, 0.05, 0.15]"))
    capsys.readouterr()
    assert model_main(["validate", str(broken)]) == 1
    assert "model.A.voltage.data: has 8 values but shape [3, 3] needs 9" in capsys.readouterr().err
    bad_param = tmp_path / "bad_param.yaml"
    bad_param.write_text(text.replace("num_iter: 16", "num_iter: 0"))
    assert model_main(["validate", str(bad_param)]) == 1
    assert "num_iter: expected an integer in [1, 1024], got 0" in capsys.readouterr().err
    np.savez(tmp_path / "pymdp.npz", A0=np.eye(2))
    assert model_main(["validate", str(tmp_path / "pymdp.npz")]) == 1
    assert "bayes-infer model from-pymdp" in capsys.readouterr().err


def test_plotjuggler_layout_matches_the_default_model_and_the_message(repo_root, tmp_path):
    """The shipped layout is what `bayes-infer model layout config/agent.yaml` writes, is valid XML, and every
    curve names a Belief field of a factor topic of the default model."""
    import re
    import xml.etree.ElementTree as ET

    shipped = repo_root / "config" / "plotjuggler_beliefs.xml"
    assert model_main(["layout", str(repo_root / "config" / "agent.yaml"), "-o", str(tmp_path / "l.xml")]) == 0
    assert (tmp_path / "l.xml").read_text() == shipped.read_text(), \
        "regenerate: bayes-infer model layout config/agent.yaml -o config/plotjuggler_beliefs.xml"
    root = ET.parse(shipped).getroot()
    model = load_model(repo_root / "config" / "agent.yaml")
    fields = set(re.findall(r"^\S+\s+(\w+)", (repo_root / "msg" / "Belief.msg").read_text(), re.M))
    curves = [c.get("name") for c in root.iter("curve")]
    for f, name in enumerate(model.factor_names):
        for k in range(model.num_states[f]):
            assert f"/beliefs/{name}/probabilities[{k}]" in curves
    for curve in curves:
        m = re.match(r"^/beliefs/(\w+)/(\w+)(\[\d+\])?$", curve)
        assert m and m.group(1) in model.factor_names and m.group(2) in fields, curve
    topics = [t.get("name") for t in root.iter("topic")]
    assert topics == [f"/beliefs/{n}" for n in model.factor_names]
    (tmp_path / "ns.xml").write_text("")
    assert model_main(["layout", str(repo_root / "config" / "agent.yaml"), "-o", str(tmp_path / "ns.xml"),
                       "--namespace", "/robot1"]) == 0
    assert '<topic name="/robot1/beliefs/door"/>' in (tmp_path / "ns.xml").read_text()
