"""What every checker of a parameter group (``adapters.*``, ``controls.*``) promises, asserted on one result; the flat
parameters the checkers read, and the two runs (without and with message definitions) the property tests make."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping


def assert_each_name_accepted_or_refused(params: Mapping[str, Any], checked: Any, prefix: str) -> list[str]:
    """Every name under ``prefix`` in ``params`` is accepted or refused, never both; each refusal names its key (the
    name's root or a key below it) and a problem. Returns each refusal's key below its root ("" for the root)."""
    names = {full.split(".")[1] for full in params}
    refused = {r.key.split(".")[1] for r in checked.refusals}
    assert refused | set(checked.accepted) == names and not refused & set(checked.accepted), checked
    keys = []
    for refusal in checked.refusals:
        root = f"{prefix}.{refusal.key.split('.')[1]}"
        assert (refusal.key == root or refusal.key.startswith(root + ".")) and refusal.problem, refusal
        keys.append(refusal.key[len(root) + 1:])
    return keys


def flat_params(prefix: str, groups: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The node's flat parameters ``{"<prefix>.<name>.<key>": value}`` of (name, {key: value}) pairs."""
    return {f"{prefix}.{name}.{key}": value for name, keys in groups for key, value in keys.items()}


def check_without_and_with_definitions(check: Callable[..., Any], prefix: str,
                                       groups: Iterable[tuple[str, Mapping[str, Any]]], names: list[str],
                                       labels: list[list[str]], lookup: Any) -> list[tuple[Any, list[str]]]:
    """The checker ``check(params, names, labels, lookup)`` of the group ``prefix`` on ``groups`` ((name, {key:
    value}) pairs), run without message definitions (lookup None), then with ``lookup``: per run, the result (every
    name accepted or refused, asserted) and its refusals' keys below their roots."""
    params = flat_params(prefix, groups)
    runs = []
    for definitions in (None, lookup):
        checked = check(params, names, labels, definitions)
        runs.append((checked, assert_each_name_accepted_or_refused(params, checked, prefix)))
    return runs
