"""Every validation error path names the field and what was expected."""
import numpy as np
import pytest

from bayes_infer_ros.model import GenerativeModel, ModelValidationError, model_from_parameters, model_to_parameters


def good(seed=0) -> GenerativeModel:
    rng = np.random.default_rng(seed)
    n = lambda x: x / x.sum(0, keepdims=True)  # noqa: E731
    return GenerativeModel(
        A=[n(rng.random((3, 2))), n(rng.random((2, 2, 4)))],
        A_dependencies=[[0], [0, 1]],
        B=[n(rng.random((2, 2, 2))), n(rng.random((4, 4, 2, 1)))],
        B_dependencies=[[0], [1, 0]],
        factor_names=["pose", "mode"],
        modality_names=["cam", "imu"],
    )


def test_good_model_passes():
    assert good().validate().num_states == (2, 4)


def mutate(fn):
    m = good()
    fn(m)
    return m


CASES = [
    ("A_dependencies", r"one dependency list per modality", lambda m: setattr(m, "A_dependencies", ((0,),))),
    ("A[1] (imu)", r"has 2 axes but A_dependencies\[1\]", lambda m: m.A.__setitem__(1, m.A[1][:, :, 0])),
    ("A[1] (imu)", r"axis 2 has length 3 but factor 1 has 4", lambda m: m.A.__setitem__(1, m.A[1][:, :, :3] / m.A[1][:, :, :3].sum(0))),
    ("A[0] (cam)", r"negative entry", lambda m: m.A[0].__setitem__((0, 0), -0.1)),
    ("A[0] (cam)", r"non-finite value nan", lambda m: m.A[0].__setitem__((0, 0), np.nan)),
    ("A[0] (cam)", r"non-finite value inf", lambda m: m.A[0].__setitem__((0, 0), np.inf)),
    ("A[0] (cam)", r"must sum to 1 .* sums to", lambda m: m.A[0].__setitem__((0, 0), m.A[0][0, 0] + 0.5)),
    ("A_dependencies[1]", r"factor index 5 out of range", lambda m: setattr(m, "A_dependencies", ((0,), (0, 5)))),
    ("A_dependencies[0]", r"dependency list is empty", lambda m: setattr(m, "A_dependencies", ((), (0, 1)))),
    ("A_dependencies[1]", r"repeated factor index", lambda m: setattr(m, "A_dependencies", ((0,), (0, 0)))),
    ("B[1] (mode)", r"must sum to 1", lambda m: m.B[1].__setitem__((0, 0, 0, 0), 3.0)),
    ("B[1] (mode)", r"axis 2 has length 3 but factor 0 has 2", lambda m: m.B.__setitem__(1, np.ones((4, 4, 3, 1)) / 4)),
    ("B[0] (pose)", r"has 2 axes but B_dependencies\[0\]", lambda m: m.B.__setitem__(0, m.B[0][..., 0])),
    ("B_dependencies[1]", r"factor index 2 out of range", lambda m: setattr(m, "B_dependencies", ((0,), (2,)))),
    ("B", r"one transition tensor per factor", lambda m: m.B.pop()),
    ("D[0]", r"shape \(3,\), expected \(2,\)", lambda m: m.D.__setitem__(0, np.ones(3) / 3)),
    ("D[1]", r"must sum to 1", lambda m: m.D.__setitem__(1, np.ones(4))),
    ("factor_names", r"expected 2 names", lambda m: setattr(m, "factor_names", ["pose"])),
    ("modality_names", r"not valid", lambda m: setattr(m, "modality_names", ["cam", "imu/raw"])),
    ("modality_names", r"unique", lambda m: setattr(m, "modality_names", ["cam", "cam"])),
    ("state_labels[1]", r"expected 4 labels", lambda m: setattr(m, "state_labels", [["a", "b"], ["x"]])),
    # empty, duplicate and NUL-holding labels (a NUL silently truncated the label in a ROS string)
    ("state_labels[0][1]", r"label '' is empty",
     lambda m: setattr(m, "state_labels", [["a", ""], ["w", "x", "y", "z"]])),
    ("state_labels[1][2]", r"label 'x' repeats state_labels\[1\]\[1\]",
     lambda m: setattr(m, "state_labels", [["a", "b"], ["w", "x", "x", "z"]])),
    ("observation_labels[0][0]", r"holds a NUL character",
     lambda m: setattr(m, "observation_labels", [["ok\0hidden", "b", "c"], ["d", "e"]])),
]


@pytest.mark.parametrize("field,pattern,mutation", CASES, ids=[f"{c[0]}:{c[1][:24]}" for c in CASES])
def test_error_names_field(field, pattern, mutation):
    m = mutate(mutation)
    with pytest.raises(ModelValidationError, match=pattern) as info:
        m.validate()
    assert info.value.field == field
    assert str(info.value).startswith(field)


def test_exact_zeros_are_valid():
    m = good()
    m.A[0] = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    m.validate()


PARAM_CASES = [
    ("model.factors", r"missing", lambda p: p.pop("model.factors")),
    ("model.A.cam.data", r"has 5 values but shape \[3, 2\] needs 6", lambda p: p.__setitem__("model.A.cam.data", p["model.A.cam.data"][:5])),
    ("model.A.imu.shape", r"missing", lambda p: p.pop("model.A.imu.shape")),
    ("model.A.cam.dependencies", r"integers", lambda p: p.__setitem__("model.A.cam.dependencies", [0.5])),
    ("model.A.cam.shape", r">= 1", lambda p: p.__setitem__("model.A.cam.shape", [0, 2])),
    ("model.modalities", r"non-empty list", lambda p: p.__setitem__("model.modalities", [])),
    ("model.B.mode.data", r"list of numbers", lambda p: p.__setitem__("model.B.mode.data", ["x"] * 32)),
]


@pytest.mark.parametrize("field,pattern,mutation", PARAM_CASES, ids=[c[0] + ":" + c[1][:16] for c in PARAM_CASES])
def test_parameter_errors_name_the_parameter(field, pattern, mutation):
    params = model_to_parameters(good())
    mutation(params)
    with pytest.raises(ModelValidationError, match=pattern) as info:
        model_from_parameters(params)
    assert info.value.field == field


# ---- a factor that no modality observes (pymdp runs it): valid, sized by B or D -----------------------------------
def unobserved(with_B: bool = True, with_D: bool = True) -> GenerativeModel:
    """good() with modality imu reading factor 0 only: factor 1 (mode) is observed by no modality."""
    m = good()
    m.A[1] = m.A[1].sum(2) / 4
    m.A_dependencies = ((0,), (0,))
    if not with_B:
        m.B, m.B_dependencies = None, ((0,), (1,))  # dependencies of transitions the model does not have are not kept
    if not with_D:
        m.D = None
    return m


def test_a_factor_no_modality_observes_is_valid_sized_by_B_or_D():
    assert unobserved().validate().num_states == (2, 4)
    assert unobserved(with_B=False).validate().num_states == (2, 4)


def test_a_factor_nothing_sizes_is_refused_naming_its_prior():
    m = good()
    m.A = [m.A[1].sum(1) / 2]  # (2, 4): one modality on factor 1 only; factor 0 observed by none
    m.A_dependencies, m.modality_names = ((1,),), ["imu"]
    m.B = m.D = None
    with pytest.raises(ModelValidationError, match=r"factor 0 is observed by no modality and the model has no B") as info:
        GenerativeModel(A=m.A, A_dependencies=m.A_dependencies).validate()
    assert info.value.field == "D[0]"


@pytest.mark.parametrize("with_B", [True, False])
def test_parameters_round_trip_a_factor_no_modality_observes(with_B):
    m = unobserved(with_B=with_B).validate()
    back = model_from_parameters(model_to_parameters(m))
    assert back.structure == m.structure
    for x, y in zip(m.D, back.D):
        np.testing.assert_array_equal(x, y)


def test_parameters_without_B_or_D_refuse_the_unobserved_factor_naming_its_prior():
    params = model_to_parameters(unobserved(with_B=False).validate())
    params.pop("model.D.mode")
    with pytest.raises(ModelValidationError, match=r"factor 'mode' is observed by no modality .* give its prior") as info:
        model_from_parameters(params)
    assert info.value.field == "model.D.mode"
    for name, levels in (("cam", 3), ("imu", 2)):  # both modalities read mode only
        params[f"model.A.{name}.dependencies"] = [1]
        params[f"model.A.{name}.shape"], params[f"model.A.{name}.data"] = [levels, 4], [1 / levels] * (4 * levels)
    params["model.D.mode"] = [0.25] * 4
    params.pop("model.D.pose")  # now pose is unobserved and unsized: named, whatever its position
    with pytest.raises(ModelValidationError, match=r"factor 'pose' is observed by no modality") as info:
        model_from_parameters(params)
    assert info.value.field == "model.D.pose"
