"""One ``diagnostic_msgs/DiagnosticStatus`` built the same way for every status the node publishes: through
diagnostic_updater's ``DiagnosticStatusWrapper`` (``summary``, ``add``) where the distro has diagnostic_updater, else
with diagnostic_msgs alone (:data:`STATUS_BUILDER` says which); both give the same message.

The node publishes its statuses itself, on the steady clock (``diagnostics_period``), in one ``DiagnosticArray``,
rather than through diagnostic_updater's ``Updater``: the ``Updater`` names each status ``<node name>: <task>``
(Humble: the name alone, so agents in two namespaces would merge; Jazzy and later, with ``diagnostic_updater.use_fqn``,
``//agent`` at the root namespace), runs its timer on the node clock (no status at all under ``use_sim_time`` before
the first ``/clock``, which is when the node's status warns about it) and declares its own parameters on the node.
"""
from __future__ import annotations

from typing import Any, Mapping

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

try:  # optional: diagnostic_updater (ros-<distro>-diagnostic-updater; not among the PyPI wheels)
    from diagnostic_updater import DiagnosticStatusWrapper
except ImportError:
    DiagnosticStatusWrapper = None

STATUS_BUILDER = "diagnostic_updater" if DiagnosticStatusWrapper is not None else "diagnostic_msgs"


def make_status(name: str, hardware_id: str, level: Any, message: str, values: Mapping[str, Any],
                wrapper: Any = DiagnosticStatusWrapper) -> DiagnosticStatus:
    """A status: ``values`` as key/value strings in their order. ``wrapper``: diagnostic_updater's
    ``DiagnosticStatusWrapper`` (None: diagnostic_msgs alone); the wrapper's fields are copied into a plain
    ``DiagnosticStatus``, as diagnostic_updater's own ``Updater.publish`` does."""
    if wrapper is None:
        status = DiagnosticStatus(name=name, hardware_id=hardware_id, message=message)
        status.level = level
        status.values = [KeyValue(key=str(k), value=str(v)) for k, v in values.items()]
        return status
    built = wrapper(name=name, hardware_id=hardware_id)
    built.summary(level, message)
    for key, value in values.items():
        built.add(str(key), str(value))
    status = DiagnosticStatus(name=built.name, hardware_id=built.hardware_id, message=built.message)
    status.level = built.level
    status.values = list(built.values)
    return status
