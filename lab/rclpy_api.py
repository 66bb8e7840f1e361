"""Every rclpy / rcl_interfaces API the ROS layer uses, with the first distro that has it (a checked table).

``API`` maps a use to the first of ``DISTROS`` that has it. An entry is ``module.Name``, ``module.Class.attr``
or ``module.Callable(keyword)``. ``test/ros/test_rclpy_api.py`` checks that

- every use in ``bayes_infer_ros/ros/*.py`` (found by :func:`collect_uses`) has an entry;
- every entry resolves on the installed rclpy when its first distro is not newer than the installed one;
- only the entries in ``FEATURE_DETECTED`` are newer than Humble, and the code reaches them only through a
  ``hasattr``/``getattr`` check (``compat.py``);
- with rclpy's git history at hand (``RCLPY_GIT_DIR``, ``RCL_INTERFACES_GIT_DIR``), each entry's first distro is
  right for humble, iron and jazzy. ``python -m lab.rclpy_api --rclpy-git DIR
  --rcl-interfaces-git DIR`` prints the same check.

No rclpy import at module level: the table and the source scan are plain Python.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Optional

DISTROS = ("humble", "iron", "jazzy", "kilted")
RCLPY_MAJOR_TO_DISTRO = {3: "humble", 4: "iron", 7: "jazzy", 9: "kilted"}

API: dict[str, str] = {
    # rclpy (module level)
    "rclpy.init(args)": "humble",
    "rclpy.init(context)": "humble",
    "rclpy.create_node(context)": "humble",
    "rclpy.create_node(parameter_overrides)": "humble",
    "rclpy.ok": "humble",
    "rclpy.try_shutdown": "humble",
    "rclpy.try_shutdown(context)": "humble",
    "rclpy.create_node": "humble",
    "rclpy.logging.get_logger": "humble",
    "rclpy.context.Context": "humble",
    "rclpy.context.Context.on_shutdown": "humble",
    "rclpy.get_default_context": "humble",
    "rclpy.duration.Duration(nanoseconds)": "humble",
    "rclpy.duration.Duration(seconds)": "humble",
    "rclpy.exceptions.ParameterException": "humble",
    "rclpy.parameter.Parameter(value)": "humble",
    "rclpy.serialization.deserialize_message": "humble",
    "rclpy.utilities.remove_ros_args": "humble",
    "rclpy.qos.QoSProfile(history)": "humble",
    "rclpy.qos.QoSProfile(depth)": "humble",
    "rclpy.qos.QoSProfile(reliability)": "humble",
    "rclpy.qos.QoSProfile(durability)": "humble",
    "rclpy.qos.HistoryPolicy": "humble",
    "rclpy.qos.ReliabilityPolicy": "humble",
    "rclpy.qos.DurabilityPolicy": "humble",
    # clocks, time, timers
    "rclpy.clock.Clock(clock_type)": "humble",
    "rclpy.clock.ClockType": "humble",
    "rclpy.clock.JumpThreshold(min_forward)": "humble",
    "rclpy.clock.JumpThreshold(min_backward)": "humble",
    "rclpy.clock.JumpThreshold(on_clock_change)": "humble",
    "rclpy.clock.Clock.create_jump_callback(post_callback)": "humble",
    "rclpy.clock.Clock.now": "humble",
    "rclpy.time.Time.nanoseconds": "humble",
    "rclpy.time.Time.to_msg": "humble",
    "rclpy.timer.Timer.cancel": "humble",
    "rclpy.timer.Timer.reset": "humble",
    "rclpy.timer.Timer.clock": "humble",
    # executors
    "rclpy.executors.SingleThreadedExecutor(context)": "humble",
    "rclpy.executors.ExternalShutdownException": "humble",
    "rclpy.executors.Executor.add_node": "humble",
    "rclpy.executors.Executor.create_task": "humble",
    "rclpy.executors.Executor.spin": "humble",
    "rclpy.executors.Executor.context": "humble",
    "rclpy.executors.Executor.spin_once": "humble",
    "rclpy.executors.Executor.spin_once(timeout_sec)": "humble",
    "rclpy.executors.Executor.shutdown(timeout_sec)": "humble",
    # the entities rclpy (and bondpy) make for a node, whose callbacks rclpy_callbacks.py puts under the guard
    "rclpy.node.Node.subscriptions": "humble",
    "rclpy.node.Node.services": "humble",
    "rclpy.node.Node.timers": "humble",
    "rclpy.subscription.Subscription.callback": "humble",
    "rclpy.subscription.Subscription.topic_name": "humble",
    "rclpy.service.Service.callback": "humble",
    "rclpy.service.Service.srv_name": "humble",
    "rclpy.service.Service.srv_type": "humble",
    "rclpy.timer.Timer.callback": "humble",
    # Node
    "rclpy.node.Node(context)": "humble",
    "rclpy.node.Node(namespace)": "humble",
    "rclpy.node.Node(use_global_arguments)": "humble",
    "rclpy.node.Node(start_parameter_services)": "humble",
    "rclpy.node.Node(enable_rosout)": "humble",
    "rclpy.node.Node.get_node_names_and_namespaces": "humble",
    "rclpy.node.Node.declare_parameters": "humble",
    "rclpy.node.Node.context": "humble",
    "rclpy.node.Node.executor": "humble",
    "rclpy.node.Node.get_name": "humble",
    "rclpy.node.Node.get_namespace": "humble",
    "rclpy.node.Node.get_fully_qualified_name": "humble",
    "rclpy.node.Node.get_logger": "humble",
    "rclpy.node.Node.get_clock": "humble",
    "rclpy.node.Node.resolve_topic_name": "humble",
    "rclpy.node.Node.resolve_service_name": "humble",
    "rclpy.node.Node.create_publisher": "humble",
    "rclpy.node.Node.create_subscription": "humble",
    "rclpy.node.Node.create_service": "humble",
    "rclpy.node.Node.create_service(qos_profile)": "humble",
    "rclpy.node.Node.create_timer(clock)": "humble",
    "rclpy.node.Node.create_guard_condition": "humble",
    "rclpy.node.Node.create_subscription(qos_overriding_options)": "humble",
    "rclpy.qos_overriding_options.QoSOverridingOptions": "humble",
    "rclpy.qos_overriding_options.QoSOverridingOptions(policy_kinds)": "humble",
    "rclpy.qos.QoSPolicyKind": "humble",
    "rclpy.node.Node.destroy_publisher": "humble",
    "rclpy.node.Node.destroy_subscription": "humble",
    "rclpy.node.Node.destroy_service": "humble",
    "rclpy.node.Node.destroy_timer": "humble",
    "rclpy.node.Node.destroy_node": "humble",
    "rclpy.node.Node.count_publishers": "humble",
    "rclpy.node.Node.count_subscribers": "humble",
    "rclpy.node.Node.get_publishers_info_by_topic": "humble",
    "rclpy.node.Node.get_topic_names_and_types": "humble",
    "rclpy.node.Node.declare_parameter(ignore_override)": "humble",
    "rclpy.node.Node.has_parameter": "humble",
    "rclpy.node.Node.get_parameter": "humble",
    "rclpy.node.Node.set_parameters": "humble",
    "rclpy.node.Node.set_parameters_atomically": "humble",
    "rclpy.node.Node.add_on_set_parameters_callback": "humble",
    "rclpy.node.Node.add_post_set_parameters_callback": "iron",
    # the parameter overrides (command line / params file), read to refuse bad values with a reason
    "rclpy.node.Node(automatically_declare_parameters_from_overrides)": "humble",
    "rclpy.node.Node.get_parameters_by_prefix": "humble",
    "rclpy.node.Node.undeclare_parameter": "humble",
    # lifecycle
    "rclpy.lifecycle.LifecycleNode": "humble",
    "rclpy.lifecycle.LifecycleState": "humble",
    "rclpy.lifecycle.TransitionCallbackReturn": "humble",
    "rclpy.lifecycle.LifecycleNode.trigger_configure": "humble",
    "rclpy.lifecycle.LifecycleNode.trigger_activate": "humble",
    "rclpy.lifecycle.LifecycleNode.on_activate": "humble",
    "rclpy.lifecycle.LifecycleNode.on_deactivate": "humble",
    "rclpy.lifecycle.LifecycleNode.create_lifecycle_publisher": "humble",
    "rclpy.lifecycle.LifecycleNode.destroy_lifecycle_publisher": "humble",
    # rcl_interfaces messages (fields)
    "rcl_interfaces.msg.ParameterDescriptor(description)": "humble",
    "rcl_interfaces.msg.ParameterDescriptor(read_only)": "humble",
    "rcl_interfaces.msg.ParameterDescriptor(dynamic_typing)": "humble",
    "rcl_interfaces.msg.ParameterDescriptor.integer_range": "humble",
    "rcl_interfaces.msg.ParameterDescriptor.floating_point_range": "humble",
    "rcl_interfaces.msg.ParameterDescriptor.additional_constraints": "humble",
    "rcl_interfaces.msg.IntegerRange(from_value)": "humble",
    "rcl_interfaces.msg.IntegerRange(to_value)": "humble",
    "rcl_interfaces.msg.IntegerRange(step)": "humble",
    "rcl_interfaces.msg.FloatingPointRange(from_value)": "humble",
    "rcl_interfaces.msg.FloatingPointRange(to_value)": "humble",
    "rcl_interfaces.msg.FloatingPointRange(step)": "humble",
    "rcl_interfaces.msg.SetParametersResult(successful)": "humble",
    "rcl_interfaces.msg.SetParametersResult(reason)": "humble",
}

# Newer than Humble: reached only through a feature check (hasattr/getattr), with a fallback.
FEATURE_DETECTED = {"rclpy.node.Node.add_post_set_parameters_callback": "compat.py"}

# Where to look for uses: attributes of these classes, imports from these packages.
_CLASSES = ("rclpy.node.Node", "rclpy.lifecycle.LifecycleNode", "rclpy.clock.Clock", "rclpy.time.Time",
            "rclpy.executors.Executor", "rclpy.timer.Timer")
_PACKAGES = ("rclpy", "rcl_interfaces", "lifecycle_msgs")
_MESSAGES = ("rcl_interfaces.msg.ParameterDescriptor", "rcl_interfaces.msg.IntegerRange",
             "rcl_interfaces.msg.FloatingPointRange", "rcl_interfaces.msg.SetParametersResult")

# Receivers in the ROS layer that are not rclpy objects although their methods share rclpy's names.
_NOT_RCLPY = {"self._pool"}
# Message field names too common to attribute to rcl_interfaces when assigned (DiagnosticStatus.name, ...).
_GENERIC_FIELDS = {"name", "type", "description", "value"}


def _split(entry: str) -> tuple[str, Optional[str]]:
    """'a.b.C.m(kw)' -> ('a.b.C.m', 'kw'); 'a.b.C' -> ('a.b.C', None)."""
    if entry.endswith(")"):
        name, kw = entry[:-1].split("(")
        return name, kw
    return entry, None


def resolve(entry: str) -> Optional[str]:
    """None when ``entry`` exists in the installed packages, else what is missing."""
    dotted, kw = _split(entry)
    parts = dotted.split(".")
    obj, i = None, len(parts)
    while i > 0:
        try:
            obj = importlib.import_module(".".join(parts[:i]))
            break
        except ImportError:
            i -= 1
    if obj is None:
        return f"no module for {dotted}"
    for part in parts[i:]:
        if isinstance(obj, type) and part not in dir(obj) and hasattr(obj, "get_fields_and_field_types"):
            if part not in obj.get_fields_and_field_types():
                return f"{dotted}: no field {part}"
            return None
        if not hasattr(obj, part):
            if isinstance(obj, type):  # an instance attribute, assigned in __init__
                return None if _instance_attribute_in_init(obj, part) else f"{dotted}: no attribute {part}"
            return f"{dotted}: no attribute {part}"
        obj = getattr(obj, part)
    if kw is None:
        return None
    if hasattr(obj, "get_fields_and_field_types"):
        return None if kw in obj.get_fields_and_field_types() else f"{dotted}: no field {kw}"
    params = inspect.signature(obj).parameters
    if kw in params:
        return None
    # QoSProfile(**kwargs) on Jazzy: a keyword the class takes as one of its properties
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return None if takes_kwargs and isinstance(obj, type) and hasattr(obj, kw) else f"{dotted}: no keyword {kw}"


def _instance_attribute_in_init(cls: type, name: str) -> bool:
    for klass in cls.__mro__:
        try:
            src = inspect.getsource(klass.__init__)
        except (OSError, TypeError):
            continue
        if f"self.{name} =" in src or f"self.{name}:" in src:
            return True
    return False


def _is_module(dotted: str) -> bool:
    try:
        importlib.import_module(dotted)
        return True
    except ImportError:
        return False


def collect_uses(files: Iterable[Path]) -> dict[str, set[str]]:
    """{entry: files using it}: imports from rclpy/rcl_interfaces/lifecycle_msgs, ``rclpy.x.y`` chains,
    attributes of rclpy's node/clock/time/executor/timer classes and the used messages' fields, keywords of
    calls to any of them, and names given to getattr/hasattr as strings. Needs rclpy importable."""
    attr_owner: dict[str, str] = {}
    for qual in _CLASSES:
        mod, cls = qual.rsplit(".", 1)
        for a in dir(getattr(importlib.import_module(mod), cls)):
            if not a.startswith("__"):
                attr_owner.setdefault(a, qual)
    field_owner: dict[str, str] = {}  # message fields count where they are assigned (d.integer_range = ...)
    for qual in _MESSAGES:
        mod, cls = qual.rsplit(".", 1)
        for a in getattr(importlib.import_module(mod), cls).get_fields_and_field_types():
            field_owner.setdefault(a, qual)
    uses: dict[str, set[str]] = {}

    def add(entry: str, where: str) -> None:
        uses.setdefault(entry, set()).add(where)

    for path in files:
        tree = ast.parse(Path(path).read_text())
        imported: dict[str, str] = {}  # local name -> dotted
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in _PACKAGES:
                for alias in node.names:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in _PACKAGES:
                        imported[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0]

        def dotted_of(expr: ast.AST) -> Optional[str]:
            if isinstance(expr, ast.Name):
                return imported.get(expr.id)
            if not isinstance(expr, ast.Attribute):
                return None
            base = dotted_of(expr.value)
            if base is not None:
                return f"{base}.{expr.attr}" if _is_module(base) else base  # Enum.MEMBER -> the enum
            if expr.attr in attr_owner and ast.unparse(expr.value) not in _NOT_RCLPY:
                return f"{attr_owner[expr.attr]}.{expr.attr}"
            if expr.attr in field_owner and isinstance(expr.ctx, ast.Store) and expr.attr not in _GENERIC_FIELDS:
                return f"{field_owner[expr.attr]}.{expr.attr}"
            return None

        name = Path(path).name
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr") and len(node.args) >= 2 \
                        and isinstance(node.args[1], ast.Constant) and node.args[1].value in attr_owner:
                    attr = node.args[1].value
                    add(f"{attr_owner[attr]}.{attr}", name)
                    continue
                target = dotted_of(func)
                if target is None:
                    continue
                if node.keywords:
                    for kw in node.keywords:
                        if kw.arg:
                            add(f"{target}({kw.arg})", name)
                else:
                    add(target, name)
            elif isinstance(node, ast.Attribute):
                target = dotted_of(node)
                if target is not None:
                    add(target, name)
            elif isinstance(node, ast.Name) and node.id in imported and "." in imported[node.id]:
                add(imported[node.id], name)
    return uses


def covered(use: str, table: dict[str, str]) -> bool:
    """A use is covered by its own entry, or by an entry that adds a keyword or an attribute to it
    (``rclpy.logging`` by ``rclpy.logging.get_logger``)."""
    if use in table:
        return True
    return any(_split(e)[0] == use or _split(e)[0].startswith(use + ".") for e in table)


# ------------------------------------------------------------------------------------------------
# against the sources of each distro (git branches)
# ------------------------------------------------------------------------------------------------
def _git_show(git_dir: str, branch: str, path: str) -> Optional[str]:
    out = subprocess.run(["git", "--git-dir", git_dir, "show", f"{branch}:{path}"], capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def _module_source(git_dir: str, branch: str, module: str) -> Optional[tuple[str, str]]:
    rel = module.replace(".", "/")
    for path in (f"rclpy/{rel}.py", f"rclpy/{rel}/__init__.py"):
        src = _git_show(git_dir, branch, path)
        if src is not None:
            return path, src
    return None


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom in ``module`` names (``from .node import X`` in rclpy.lifecycle)."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _imports(module: str, path: str, tree: ast.Module) -> dict[str, str]:
    return {a.asname or a.name: _absolute(module, path.endswith("__init__.py"), n)
            for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}


def _class_defines(git_dir: str, branch: str, module: str, cls: str, attr: str, kw: Optional[str],
                   depth: int = 0) -> bool:
    found = _module_source(git_dir, branch, module)
    if found is None or depth > 4:
        return False
    path, src = found
    tree = ast.parse(src)
    imports = _imports(module, path, tree)
    properties = {i.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls for i in n.body
                  if isinstance(i, ast.FunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == attr:
                    if kw is None:
                        return True
                    args = item.args
                    if kw in [a.arg for a in args.args + args.kwonlyargs]:
                        return True
                    # QoSProfile(**kwargs): a keyword the class handles as one of its properties
                    return args.kwarg is not None and kw in properties
            if kw is None:  # an instance attribute, assigned in a method
                for item in ast.walk(node):
                    if isinstance(item, ast.Attribute) and item.attr == attr and isinstance(item.ctx, ast.Store):
                        return True
            for base in node.bases:
                bname = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
                if bname is None:
                    continue
                bmod = imports.get(bname, module)
                if _class_defines(git_dir, branch, bmod, bname, attr, kw, depth + 1):
                    return True
            return False
    if cls in imports:  # re-exported (rclpy.lifecycle.LifecycleNode)
        return _class_defines(git_dir, branch, imports[cls], cls, attr, kw, depth + 1)
    return False


def _module_defines(git_dir: str, branch: str, module: str, name: str, kw: Optional[str]) -> bool:
    found = _module_source(git_dir, branch, module)
    if found is None:
        return False
    tree = ast.parse(found[1])
    imports = _imports(module, found[0], tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            if kw is None:
                return True
            if isinstance(node, ast.FunctionDef):
                return kw in [a.arg for a in node.args.args + node.args.kwonlyargs]
            return any(_class_defines(git_dir, branch, module, name, ctor, kw) for ctor in ("__init__", "__new__"))
        if isinstance(node, ast.ImportFrom) and name in imports and any((a.asname or a.name) == name
                                                                         for a in node.names):
            return kw is None or _module_defines(git_dir, branch, imports[name], name, kw)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def present_in_rclpy_branch(git_dir: str, branch: str, entry: str) -> bool:
    """Whether ``entry`` (an rclpy entry) exists in rclpy's ``branch``, read from its sources."""
    dotted, kw = _split(entry)
    parts = dotted.split(".")
    # the longest prefix that is a module in that branch
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        if _module_source(git_dir, branch, module) is not None:
            rest = parts[i:]
            break
    else:
        return False
    if not rest:
        return True
    if len(rest) == 1:
        return _module_defines(git_dir, branch, module, rest[0], kw)
    cls, attr = rest[0], rest[1]
    return _class_defines(git_dir, branch, module, cls, attr, kw)


def present_in_rcl_interfaces_branch(git_dir: str, branch: str, entry: str) -> bool:
    """Whether a message field entry exists in ros2/rcl_interfaces' ``branch`` (.msg / .srv text)."""
    dotted, kw = _split(entry)
    pkg, kind, msg, *field = dotted.split(".")
    text = _git_show(git_dir, branch, f"{pkg}/{kind}/{msg}.{kind}")
    if text is None:
        return False
    name = kw or (field[0] if field else None)
    if name is None:
        return True
    return any(line.split("#")[0].split()[1:2] == [name] for line in text.splitlines() if line.split("#")[0].strip())


def check_against_git(rclpy_git: Optional[str], rcl_interfaces_git: Optional[str],
                      branches: tuple = ("humble", "iron", "jazzy")) -> list[str]:
    """Every disagreement between the table and the branches' sources ([] when the table is right)."""
    problems = []
    for entry, first in API.items():
        if entry.startswith("rcl_interfaces."):
            git_dir, present = rcl_interfaces_git, present_in_rcl_interfaces_branch
        else:
            git_dir, present = rclpy_git, present_in_rclpy_branch
        if git_dir is None:
            continue
        for branch in branches:
            expected = DISTROS.index(branch) >= DISTROS.index(first)
            if present(git_dir, branch, entry) != expected:
                problems.append(f"{entry}: table says first in {first}, but {branch} "
                                f"{'lacks' if expected else 'has'} it")
    return problems


def installed_distro() -> str:
    """The distro of the importable rclpy, from its version (3.x Humble, 4.x Iron, 7.x Jazzy, 9.x Kilted)."""
    from importlib import metadata

    for dist in ("ros-rclpy", "rclpy"):
        try:
            major = int(metadata.version(dist).split(".")[0])
            return RCLPY_MAJOR_TO_DISTRO.get(major, DISTROS[-1])
        except metadata.PackageNotFoundError:
            continue
    import os

    return os.environ.get("ROS_DISTRO", DISTROS[-1])


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rclpy-git", help="git dir of ros2/rclpy (branches humble, iron, jazzy)")
    parser.add_argument("--rcl-interfaces-git", help="git dir of ros2/rcl_interfaces")
    args = parser.parse_args(argv)
    for entry, first in API.items():
        print(f"{first:8s} {entry}")
    problems = check_against_git(args.rclpy_git, args.rcl_interfaces_git)
    for p in problems:
        print("MISMATCH", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
