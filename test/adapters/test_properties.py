"""Property-based (hypothesis, pinned in requirements/dev.txt): the adapters' checker and readers never raise.

Settings and messages are generated from the message definitions (rosbags' Kilted definitions, as ``bayes-infer
model validate`` reads them): a setting is a well-formed adapter for a leaf of a type's definition (a number binned, a
string or an enum mapped to levels, a sequence reduced or selected by a parallel key), sometimes with one key spoiled
(a value of another type, a mapping, spaces, an index past the cap, a level given twice, an unknown key). A message
follows its type's definition with hostile values (NaN, +-inf, 1e200, integers no double holds, sequences of other
lengths and types, absurd scan geometry). Properties:

- ``check_adapters`` returns, for every adapter, either a spec or one refusal whose key is that adapter's parameter
  (``adapters.<name>`` or ``adapters.<name>.<key>``); it raises nothing.
- ``read_level`` on any message of the type returns a level of the modality, with probabilities that are a
  distribution over the levels when it has them, or a refusal with a reason of ``adapters.REASONS``.

The budget is fixed (``max_examples``, derandomized, no deadline) so that ``make check`` runs it in a few seconds.
"""
from __future__ import annotations

import array
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayes_infer_ros.adapters import MAX_ENTRIES, REASONS, REDUCTIONS, TESTED_TYPES, check_adapters, read_level
from bayes_infer_ros.adapters.schema import FieldType
from checked_params import check_without_and_with_definitions, flat_params
from bayes_infer_ros.bags.sensor_messages import definitions_lookup

LOOKUP = definitions_lookup()


def _defined(msg_type: str) -> bool:
    try:
        LOOKUP(msg_type)
    except LookupError:
        return False  # vision_msgs where it is not installed
    return True


TYPES = sorted(t for t in TESTED_TYPES + ("diagnostic_msgs/msg/DiagnosticArray",) if _defined(t))
NAMES = ["door", "arm"]
LABELS = [["open", "ajar", "shut"], ["free", "holding"]]
KEY_STRINGS = ("a", "b", "gripper", "x", "")
BUDGET = settings(max_examples=300, derandomize=True, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HUGE = (1e200, -1e200, 1.7e308, 10**400, -(10**400))
numbers = st.one_of(st.floats(-10, 10), st.integers(-3, 3),
                    st.sampled_from((0.0, 0.5, math.nan, math.inf, -math.inf) + HUGE))
scalars = st.one_of(numbers, st.booleans(), st.sampled_from(KEY_STRINGS + ("open", "0", "2", " a", "\u00b2")))
junk = st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "open"]), scalars, min_size=1, max_size=2),
                 st.lists(st.lists(scalars, max_size=2), min_size=1, max_size=2), st.just(b"\x00"),
                 st.lists(st.dictionaries(st.sampled_from(["a", "open"]), scalars, max_size=1), min_size=1, max_size=2))


# ---- leaves of the definitions -------------------------------------------------------------------------------------
def leaves(msg_type: str, depth: int = 4, prefix: str = "", many: bool = False) -> list[tuple[str, FieldType, bool]]:
    """(path, the type of its values, whether it gives many) for every value a path can reach in ``msg_type``; a
    sequence of messages is entered by ``[]`` and by ``[0]``, a sequence of values read whole and by ``[1]``, a
    message of numbers is a leaf too (``norm``)."""
    out = []
    for name, field in LOOKUP(msg_type).items():
        path = prefix + name
        if field.kind == "message":
            if not field.sequence and all(f.kind in ("number", "integer") and not f.sequence
                                          for f in LOOKUP(field.message).values()):
                out.append((path, field, many))
            if depth > 0:
                for step, gives in ((("[]", True), ("[0]", many)) if field.sequence else (("", many),)):
                    out += leaves(field.message, depth - 1, f"{path}{step}.", gives)
        elif field.sequence:
            out += [(path, FieldType(field.kind), True), (f"{path}[1]", FieldType(field.kind), many)]
        else:
            out.append((path, field, many))
    return out


LEAVES = {t: leaves(t) for t in TYPES}


def parallel_keys(msg_type: str, path: str) -> list[tuple[str, str]]:
    """(path, kind) of the strings, integers or booleans whose entries pair up with ``path``'s (the same
    sequences)."""
    container = path.rsplit("[]", 1)[0] if "[]" in path else path.rpartition(".")[0]
    return [(p, kind.kind) for p, kind, many in LEAVES[msg_type]
            if many and p != path and kind.kind in ("string", "integer", "boolean")
            and (p.rsplit("[]", 1)[0] if "[]" in p else p.rpartition(".")[0]) == container]


def level_key(draw, labels: list[str], level: int) -> str:
    """A level as a key names it: by label or by index."""
    return draw(st.sampled_from([labels[level], str(level)]))


def distinct_levels(draw, labels: list[str], most: int) -> list[str]:
    """Keys of distinct levels (each by label or by index)."""
    levels = draw(st.lists(st.integers(0, len(labels) - 1), min_size=1, max_size=most, unique=True))
    return [level_key(draw, labels, level) for level in levels]


def values_of(kind: str):
    return st.sampled_from(KEY_STRINGS) if kind == "string" else st.booleans() if kind == "boolean" else \
        st.integers(-2, 3) if kind == "integer" else numbers


@st.composite
def adapter(draw, spoiled: bool = True) -> tuple[str, dict[str, Any]]:
    """A well-formed adapter of a generated leaf, sometimes (``spoiled``) with one key made wrong."""
    name = draw(st.sampled_from(NAMES))
    labels = LABELS[NAMES.index(name)]
    msg_type = draw(st.sampled_from(TYPES))
    path, kind, many = draw(st.sampled_from(LEAVES[msg_type]))
    keys: dict[str, Any] = {"topic": "t", "type": msg_type, "field": path}
    keyed = parallel_keys(msg_type, path) if many else []
    if keyed and draw(st.booleans()):
        keys["key_field"], key_kind = draw(st.sampled_from(keyed))
        keys["key"] = draw(values_of(key_kind))
    numeric = kind.kind in ("number", "integer", "message")
    if numeric and (many or kind.kind == "message") and (draw(st.booleans()) or "key" not in keys):
        keys["reduction"] = "norm" if kind.kind == "message" else draw(st.sampled_from(REDUCTIONS))
        scan = msg_type == "sensor_msgs/msg/LaserScan" and path in ("ranges", "intensities")
        sector = draw(st.sampled_from(["", "index_range"] + ["angle_range"] * scan))
        if sector == "index_range":
            first = draw(st.integers(0, 4))
            keys["index_range"] = [first, first + draw(st.integers(1, 5))]
        elif sector == "angle_range":
            low = draw(st.floats(-math.pi, math.pi))
            keys["angle_range"] = [low, low + draw(st.floats(0.01, math.pi))]
        if draw(st.booleans()):
            keys["empty_value"] = draw(numbers)
    if numeric:
        inner = draw(st.lists(st.floats(-5, 5), min_size=1, max_size=len(labels), unique=True))
        edges = sorted(inner + draw(st.sampled_from([[], [-math.inf], [math.inf], [-math.inf, math.inf]])))
        keys["bins"] = edges if len(edges) > 1 else edges + [10.0]
        if len(keys["bins"]) > len(labels) + 1 or draw(st.booleans()):
            keys["bin_levels"] = [level_key(draw, labels, draw(st.integers(0, len(labels) - 1)))
                                  for _ in keys["bins"][1:]]
        if draw(st.booleans()):
            keys["sigma"] = draw(st.sampled_from([1e-300, 0.01, 0.5, 3.0, 1e300]))
    else:
        values = draw(st.lists(values_of(kind.kind), min_size=1, max_size=len(labels), unique=True))
        if draw(st.booleans()):
            keys["levels"] = values
        else:
            for label, value in zip(distinct_levels(draw, labels, len(values)), values):
                keys[f"levels.{label}"] = [value]
    if "sigma" not in keys and draw(st.booleans()):
        for label in distinct_levels(draw, labels, 2):
            row = draw(st.lists(st.floats(0, 1), min_size=len(labels), max_size=len(labels)))
            keys[f"confusion.{label}"] = row if sum(row) <= 0 else [p / sum(row) for p in row]
    if spoiled and draw(st.booleans()):
        spoil(draw, keys)
    return name, keys


def spoil(draw, keys: dict[str, Any]) -> None:
    """One key of ``keys`` made wrong: another value, spaces, an index past the cap, a duplicate, an unknown key."""
    how = draw(st.sampled_from(["value", "junk", "junk", "spaces", "cap", "drop", "unknown", "twice", "level"]))
    key = draw(st.sampled_from(sorted(keys)))
    if how == "value":
        keys[key] = draw(st.one_of(scalars, st.lists(scalars, max_size=4)))
    elif how == "junk":  # a value ROS cannot hold, in a key the adapter has or in its levels' values
        keys[draw(st.sampled_from([key, key, "levels", "levels.open"]))] = draw(junk)
    elif how == "spaces" and isinstance(keys[key], str):
        keys[key] = f" {keys[key]}"
    elif how == "cap":
        keys["field"] = f"{keys['field']}[{MAX_ENTRIES}]"
    elif how == "drop":
        del keys[key]
    elif how == "unknown":
        keys[draw(st.sampled_from(["treshold", "levels.", "confusion", "levels.open.x", "bins.0"]))] = draw(scalars)
    elif how == "twice":
        keys["confusion.open"], keys["confusion.0"] = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    elif how == "level":
        keys[draw(st.sampled_from(["levels.3", "confusion.7", "levels.holding", "confusion.\u00b2"]))] = [1.0, 0.0]


# ---- messages of a definition ------------------------------------------------------------------------------------
def entry(draw, field: FieldType, depth: int) -> Any:
    if field.kind == "message":
        return message(draw, field.message, depth - 1)
    if field.kind == "number":
        return draw(numbers)
    if field.kind == "integer":
        return draw(st.one_of(st.integers(-3, 5), st.sampled_from([2**63 - 1, 2**64 - 1, 10**400])))
    if field.kind == "boolean":
        return draw(st.booleans())
    if field.kind == "string":
        return draw(st.sampled_from(KEY_STRINGS))
    return draw(st.sampled_from([b"\x00", 0, "c"]))


def sequence(draw, field: FieldType, depth: int) -> Any:
    """A sequence field as rclpy (lists, array.array) or rosbags (numpy arrays) gives it, 0..5 entries."""
    entries = [entry(draw, FieldType(field.kind, field.message), depth) for _ in range(draw(st.integers(0, 5)))]
    form = draw(st.sampled_from(["list", "numpy", "array"]))
    if field.kind == "number" and form != "list":
        doubles = [float(v) if abs(v) < 1e300 else math.nan for v in entries]  # 10**400 is no double
        if form == "array":
            return array.array("d", doubles)
        with np.errstate(over="ignore"):  # 1e200 is +inf as a float32, as a driver's cast makes it
            return np.asarray(doubles, np.float32 if draw(st.booleans()) else np.float64)
    return entries


def message(draw, msg_type: str, depth: int = 4) -> SimpleNamespace:
    """A message of ``msg_type`` whose fields follow its definition (nested to ``depth``; deeper: no fields)."""
    if depth < 0:
        return SimpleNamespace()
    fields = {}
    for name, field in LOOKUP(msg_type).items():
        if msg_type == "sensor_msgs/msg/LaserScan" and name.startswith("angle_") and draw(st.booleans()):
            fields[name] = draw(st.floats(0.001, 0.1)) if name == "angle_increment" else draw(st.floats(-3.2, 3.2))
        else:
            fields[name] = sequence(draw, field, depth) if field.sequence else entry(draw, field, depth)
    return SimpleNamespace(**fields)


# ---- the properties ----------------------------------------------------------------------------------------------
def assert_reading(got, spec) -> None:
    """A level of the modality (with probabilities, a distribution over its levels), or a listed reason."""
    if got.ok:
        assert 0 <= got.level < spec.num_levels, got
        if got.probabilities is not None:
            p = np.asarray(got.probabilities)
            assert p.shape == (spec.num_levels,) and np.isfinite(p).all() and (p >= 0).all(), got
            assert abs(p.sum() - 1.0) < 1e-9, got
            assert spec.sigma is None or got.level == int(np.argmax(p)), got  # a confusion row: its own level
    else:
        assert got.reason in REASONS and got.level is None and got.detail, got


@BUDGET
@given(adapters=st.lists(adapter(), min_size=1, max_size=3), data=st.data())
def test_the_checker_and_the_readers_never_raise(adapters, data):
    _, (checked, _) = check_without_and_with_definitions(check_adapters, "adapters", adapters, NAMES, LABELS, LOOKUP)
    for spec in checked.accepted.values():
        for _ in range(3):
            assert_reading(read_level(message(data.draw, spec.type), spec), spec)


def test_the_generated_adapters_are_mostly_accepted_and_their_readings_varied():
    """The property above is only as good as its generator: most unspoiled adapters pass the checker (with the
    definitions), their messages read as levels, and they are refused for many of the reasons."""
    accepted, outcomes = [], set()

    @settings(BUDGET, max_examples=100)
    @given(named=adapter(spoiled=False), data=st.data())
    def one(named, data):
        checked = check_adapters(flat_params("adapters", [named]), NAMES, LABELS, LOOKUP)
        accepted.append(checked.ok)
        for spec in checked.accepted.values():
            for _ in range(2):
                got = read_level(message(data.draw, spec.type), spec)
                assert_reading(got, spec)
                outcomes.add(got.reason or "level")
    one()
    assert sum(accepted) >= 0.6 * len(accepted), (sum(accepted), len(accepted))
    assert "level" in outcomes and len(outcomes - {"level"}) >= 4, outcomes
