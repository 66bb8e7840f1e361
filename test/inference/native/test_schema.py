"""The native kernels' named arguments (``inference/native/schema.py``): every entry point's positional order is its
schema's, every argument is documented once, and the ``ints`` header's slot constants are the packing's order."""
import importlib
import inspect
import re

import numpy as np
import pytest

from bayes_infer_ros.inference import build_inference
from bayes_infer_ros.inference.native import schema
from bayes_infer_ros.inference.native.arrays import NativeModel
from variant_cases import SKEWED_ZEROS, structured_case

pytestmark = pytest.mark.numba
# the CUDA kernels are built per dtype by a factory: entry point -> (factory, its arguments)
CUDA_FACTORIES = {"cuda_kernels.fpi_tick": ("fpi_tick_kernel", ("float32",)),
                  "cuda_large.fpi_tick_global": ("fpi_tick_global_kernel", ("float32", False)),
                  "cuda_window.window": ("window_kernel", ("float32",))}


def _documented() -> list[str]:
    """The argument names of the schema module's "Arguments" section, in order (one per ``name : shape`` line)."""
    section = schema.__doc__.split("Arguments\n---------\n", 1)[1]
    return re.findall(r"^(\w+) : ", section, flags=re.MULTILINE)


def _kernel(entry: str):
    module_name, name = entry.split(".")
    module = importlib.import_module(f"bayes_infer_ros.inference.native.{module_name}")
    if entry in CUDA_FACTORIES:
        factory, args = CUDA_FACTORIES[entry]
        kernel = getattr(module, factory)(*args)
        return getattr(kernel, "py_func", None) or kernel.fn  # numba's CUDA dispatcher, or its simulator's kernel
    return getattr(module, name).py_func


@pytest.mark.parametrize("entry", list(schema.ENTRY_POINTS))
def test_each_entry_point_takes_its_schemas_order(entry):
    params = tuple(inspect.signature(_kernel(entry)).parameters)
    fields = schema.ENTRY_POINTS[entry]._fields
    assert params == fields, entry
    model = schema.model_fields(schema.ENTRY_POINTS[entry])
    assert model and params[:len(model)] == model  # the model's arguments lead
    assert not set(params[len(model):]) & schema.MODEL_NAMES, entry  # and only lead


def test_every_argument_is_documented_once():
    documented = _documented()
    assert len(documented) == len(set(documented)), [n for n in documented if documented.count(n) > 1]
    used = {f for s in schema.ENTRY_POINTS.values() for f in s._fields} | set(schema.ModelIndex._fields)
    assert set(documented) == used


def test_the_header_slots_are_the_packings_order():
    """Slot j of ``ints`` holds ModelIndex's field j: the slot constants the CPU and CUDA kernels read by."""
    case = structured_case(SKEWED_ZEROS, 61, T=2)
    engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba")
    model = engine.model
    assert isinstance(model, NativeModel)
    slots = {name: getattr(schema, name.upper()) for name in schema.ModelIndex._fields}
    assert sorted(slots.values()) == list(range(len(slots)))
    ints, w = model.ints, schema.HEADER_WIDTH
    for name, j in slots.items():
        offset, rows, cols = ints[w * j:w * j + w]
        np.testing.assert_array_equal(ints[offset:offset + rows * cols], getattr(model, name).ravel(), err_msg=name)
    for entry, sch in schema.ENTRY_POINTS.items():
        # the CUDA engine binds device copies (and Bs) itself, the evidence host A_clip and the evidence floats
        if not entry.startswith(("cuda", "evidence")):
            assert len(model.bind(sch)) == len(schema.model_fields(sch)) and model.bind(sch) is model.bind(sch)
