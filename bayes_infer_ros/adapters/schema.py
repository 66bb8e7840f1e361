"""An adapter checked against its message type's definition (pure: the definition comes from a ``lookup`` the
caller gives: ``ros/adapter_inputs.py`` reads the generated rclpy classes).

:func:`check_spec` follows ``field`` and ``key_field`` through the type's fields and refuses, naming the parameter,
what cannot work on every message of the type: a field that does not exist, an index on a value, a sequence of
messages without ``[]`` or ``[i]``, a string or boolean where a number is needed, a sequence without a reduction, a
message that is not a vector of numbers under ``norm``, levels of another type than the field's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from .config import AdapterConfigError, AdapterSpec
from .paths import ALL, Step, parse_path, path_text

NUMBER, INTEGER, BOOLEAN, STRING, MESSAGE, OTHER = "number", "integer", "boolean", "string", "message", "other"


@dataclass(frozen=True)
class FieldType:
    """A field's type: ``kind`` (number: a float; integer; boolean; string; message; other: bytes, chars), the
    message type (``pkg/msg/Name``) when it is a message, and whether it is a sequence (array or sequence) of them."""

    kind: str
    message: str = ""
    sequence: bool = False

    def describe(self) -> str:
        """``a number``, ``a std_msgs/msg/Header message``, ``a sequence of strings``, ``a sequence of
        diagnostic_msgs/msg/DiagnosticStatus messages``."""
        what = f"{self.message} message" if self.kind == MESSAGE else self.kind
        return f"a sequence of {what}s" if self.sequence else f"a {what}"


# A message type -> its fields; raises LookupError (or OSError: a definition file not found) saying why when it has
# no definition of the type.
Lookup = Callable[[str], Mapping[str, FieldType]]


@dataclass(frozen=True)
class Leaf:
    """Where a path ends: the type of its values, whether it gives many, and its steps with an implicit trailing
    ``[]`` made explicit (a path ending in a sequence of values)."""

    type: FieldType
    many: bool
    steps: tuple[Step, ...]


def follow(msg_type: str, steps: tuple[Step, ...], lookup: Lookup, param: str) -> Leaf:
    """The type at the end of ``steps`` in ``msg_type``; AdapterConfigError (``param``) when a step cannot work."""
    current = FieldType(MESSAGE, msg_type)
    many = False
    explicit = list(steps)
    for k, step in enumerate(steps):
        where = path_text(steps[:k]) or msg_type
        if current.kind != MESSAGE or current.sequence:
            raise AdapterConfigError(f"{param}: {where} is {current.describe()}, which has no field {step.name!r}")
        fields = lookup(current.message)
        if step.name not in fields:
            raise AdapterConfigError(f"{param}: {current.message} has no field {step.name!r} (fields: "
                                     f"{', '.join(fields)})")
        field = fields[step.name]
        if step.index is not None and not field.sequence:
            raise AdapterConfigError(f"{param}: {path_text(steps[:k + 1])}: {step.name} is {field.describe()}, "
                                     "not a sequence: drop the index")
        if step.index is None:
            current = field
            if field.sequence and field.kind == MESSAGE and k < len(steps) - 1:
                raise AdapterConfigError(f"{param}: {step.name} is {field.describe()}: read one entry with "
                                         f"{step.name}[i] or every entry with {step.name}[]")
            continue
        many = many or step.index == ALL
        current = FieldType(field.kind, field.message)
    if current.sequence:
        if current.kind == MESSAGE:
            raise AdapterConfigError(f"{param}: {path_text(steps)} is {current.describe()}: name a field of its "
                                     f"entries, such as {path_text(steps)}[].<field> or {path_text(steps)}[0].<field>")
        explicit[-1] = Step(steps[-1].name, ALL)
        current, many = FieldType(current.kind), True
    return Leaf(current, many, tuple(explicit))


def _same_sequences(field: tuple[Step, ...], key: tuple[Step, ...]) -> bool:
    """``key`` passes through the same sequences as ``field``, so their entries pair up one to one: the same steps
    up to the last ``[]``, whose field may differ (parallel sequences, such as JointState's ``name`` and
    ``position``)."""
    last = [k for k, s in enumerate(field) if s.index == ALL][-1]
    key_last = [k for k, s in enumerate(key) if s.index == ALL][-1]
    return last == key_last and field[:last] == key[:last]


def check_spec(spec: AdapterSpec, lookup: Lookup) -> None:
    """Refuse ``spec`` (AdapterConfigError naming the parameter) unless it can read every message of its type."""
    param = spec.param
    leaf = follow(spec.type, parse_path(spec.field), lookup, f"{param}.field")
    kind = leaf.type.kind
    if spec.key_field is not None:
        key = follow(spec.type, parse_path(spec.key_field), lookup, f"{param}.key_field")
        if not leaf.many or not key.many or not _same_sequences(leaf.steps, key.steps):
            raise AdapterConfigError(f"{param}.key_field: {spec.key_field} must pass through the same sequences as "
                                     f"field {spec.field} (their entries pair up one to one), e.g. field position "
                                     "and key_field name, or detections[].results[].hypothesis.score and "
                                     "detections[].results[].hypothesis.class_id")
        if key.type.kind not in (NUMBER, INTEGER, BOOLEAN, STRING):
            raise AdapterConfigError(f"{param}.key_field: {spec.key_field} holds {key.type.describe()}s; a key "
                                     "compares numbers, booleans or strings")
        if not _kind_fits(_kind(spec.key), key.type.kind):
            raise AdapterConfigError(f"{param}.key: {spec.key!r} is a {_kind(spec.key)} but {spec.key_field} "
                                     f"holds {key.type.kind}s")
    elif leaf.many and spec.reduction is None:
        raise AdapterConfigError(f"{param}.reduction: {spec.field} gives many values (a sequence): set a reduction "
                                 "(min, max, mean or norm), a key (key_field and key), or read one entry with [i]")
    if spec.reduction == "norm" and kind == MESSAGE and not leaf.many:
        fields = lookup(leaf.type.message)
        if not fields or any(f.sequence or f.kind not in (NUMBER, INTEGER) for f in fields.values()):
            raise AdapterConfigError(f"{param}.reduction: norm reads a message of numbers (geometry_msgs Vector3, "
                                     f"Point, Quaternion); {spec.field} is {leaf.type.describe()}")
        return _check_values(spec, NUMBER)
    if kind == MESSAGE:
        raise AdapterConfigError(f"{param}.field: {spec.field} is {leaf.type.describe()}: name one of its fields "
                                 f"({', '.join(lookup(leaf.type.message))}), or reduce a vector of numbers with "
                                 "reduction: norm")
    if kind == OTHER:
        raise AdapterConfigError(f"{param}.field: {spec.field} holds bytes or characters; an adapter reads numbers, "
                                 "booleans or strings")
    if spec.reduction is not None:
        if not leaf.many:
            raise AdapterConfigError(f"{param}.reduction: {spec.field} is a single value, not a sequence or a vector")
        if kind not in (NUMBER, INTEGER):
            raise AdapterConfigError(f"{param}.reduction: {spec.field} holds {kind}s; {spec.reduction} needs numbers "
                                     "(without a reduction, a key selects one entry)")
    _check_values(spec, kind)


def _check_values(spec: AdapterSpec, kind: str) -> None:
    """bins read numbers; levels' values have the field's kind (a float field's may be integers)."""
    param = spec.param
    if spec.bins is not None:
        if kind not in (NUMBER, INTEGER):
            raise AdapterConfigError(f"{param}.bins: {spec.field} holds {kind}s, not numbers; use levels")
        return
    for candidate, _ in spec.level_of:
        if not _kind_fits(_kind(candidate), kind):
            raise AdapterConfigError(f"{param}.levels: {candidate!r} is a {_kind(candidate)} but {spec.field} "
                                     f"holds {kind}s")


def _kind(value) -> str:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, str):
        return STRING
    return INTEGER if isinstance(value, int) else NUMBER


def _kind_fits(given: str, field: str) -> bool:
    return given == field or (field == NUMBER and given == INTEGER)
