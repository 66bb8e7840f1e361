"""What every checker of a parameter group (``adapters.*``, ``controls.*``) promises, asserted on one result."""
from __future__ import annotations

from typing import Any, Mapping


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
