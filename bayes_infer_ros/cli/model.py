"""``bayes-infer model``: bring your own model.

    bayes-infer model from-pymdp PYMDP.npz -o MODEL.yaml|MODEL.npz   pymdp's A, B, C, D, E (+ dependencies, policy
                                                                    settings) -> a model file
    bayes-infer model validate FILE [--params-file MORE.yaml ...]   the node's validation; exit 0 when valid
    bayes-infer model show FILE                                     factors, modalities, shapes, dependencies, labels
    bayes-infer model layout FILE -o LAYOUT.xml [--namespace NS]    a PlotJuggler layout for its belief topics

``validate`` runs what the node runs at configure (load + validate the model; the node parameters of a params file
are checked against the node's table too; the sensor adapters, ``adapters.*``, against the model's modalities and
levels, the control adapters, ``controls.*``, against its factors' controls, both against the message definitions
available offline, and the belief events, ``events.*``, against its factors and levels, with the adapters' checker,
``adapters/check.py``, which the node runs on ``adapters.*`` at configure) and exits 0 for a valid file, 1 naming
the tensor (or parameter) and the problem otherwise. ``--params-file`` adds the parameters of more files, merged in
order after FILE's as the node merges its params files (``config/agent_adapters.yaml`` after ``config/agent.yaml``).
The pymdp file format: :mod:`bayes_infer_ros.model.pymdp_format`, docs/your-model.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from bayes_infer_ros.adapters import PREFIX as ADAPTERS_PREFIX
from bayes_infer_ros.adapters import Refusal, check_adapters, check_controls, check_events
from bayes_infer_ros.adapters.controls import PREFIX as CONTROLS_PREFIX
from bayes_infer_ros.adapters.controls import control_targets
from bayes_infer_ros.adapters.events import PREFIX as EVENTS_PREFIX
from bayes_infer_ros.adapters.events import event_targets
from bayes_infer_ros.adapters.schema import Lookup
from bayes_infer_ros.inference import VARIANTS
from bayes_infer_ros.model import GenerativeModel, ModelValidationError, load_model, read_parameters_yaml, save_model
from bayes_infer_ros.model.io import save_parameters_yaml
from bayes_infer_ros.model.pymdp_format import read_pymdp_file
from bayes_infer_ros.node.parameters import PARAMETERS, SURPRISE_PREFIXES, unknown_parameters, validate_change
from bayes_infer_ros.viewer_layout import plotjuggler_layout


def _node_parameter_problems(flat: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(errors, warnings) for the node parameters of params files (flat names; the model itself and the adapters
    are checked apart)."""
    errors = []
    for spec in PARAMETERS:
        if spec.name in flat:
            value = flat[spec.name]
            if isinstance(spec.default, float) and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            reason = validate_change(spec.name, value, variants=_variant_names(), has_B=True, startup=True)
            if reason:
                errors.append(f"parameter {reason}")
    for name in sorted(n for n in flat if n.startswith(SURPRISE_PREFIXES)):
        reason = validate_change(name, flat[name], variants=_variant_names(), has_B=True, startup=True)
        if reason:
            errors.append(f"parameter {reason}")
    known = [p.name for p in PARAMETERS]
    warnings = unknown_parameters(flat.keys(), known,
                                  ("model.", ADAPTERS_PREFIX, CONTROLS_PREFIX, EVENTS_PREFIX) + SURPRISE_PREFIXES)
    return errors, warnings


def _offline_lookup() -> tuple[Optional[Lookup], list[str]]:
    """The message definitions available without ROS (rosbags' and the installed ``.msg`` files), or None with a
    warning when rosbags is not installed."""
    try:
        from bayes_infer_ros.bags.sensor_messages import definitions_lookup  # optional dependency: rosbags
        return definitions_lookup(), []
    except ModuleNotFoundError as exc:
        return None, [f"adapters and controls checked without the message definitions ({exc.name} is not installed: "
                      "pip install 'bayes_infer_ros[bags]')"]


def _binding_problems(flat: Mapping[str, Any], model: GenerativeModel,
                      lookup: Optional[Lookup]) -> tuple[list[Refusal], list[str], dict[str, int]]:
    """(refusals, warnings, how many of each were accepted) of the ``adapters.*``, ``controls.*`` and ``events.*``
    parameters against ``model`` (its modalities and levels, its factors' controls, its factors and levels) and,
    for adapters and controls, the message definitions of ``lookup`` (None: the settings alone)."""
    names = [model.modality_name(i) for i in range(model.num_modalities)]
    labels = [model.observation_label_list(i) for i in range(model.num_modalities)]
    checked = {"adapters": check_adapters(flat, names, labels, lookup),
               "controls": check_controls(flat, *control_targets(model), lookup),
               "events": check_events(flat, *event_targets(model))}
    warnings = []
    unchecked = sum(len(checked[k].accepted) for k in ("adapters", "controls"))
    if lookup is None and unchecked:
        warnings.append(f"{unchecked} adapters' and controls' fields, keys and values not checked against their "
                        "message types")
    refusals = [r for c in checked.values() for r in c.refusals]
    return refusals, warnings, {kind: len(c.accepted) for kind, c in checked.items()}


def _parameters(path: Path, more: Sequence[Path]) -> tuple[dict[str, Any], dict[str, Path]]:
    """The flat parameters of ``path`` (a params YAML; none for an .npz) and then of each of ``more``, later files
    winning, and the file each came from."""
    flat: dict[str, Any] = {}
    origin: dict[str, Path] = {}
    for file in ([path] if path.suffix.lower() in (".yaml", ".yml") else []) + list(more):
        for name, value in read_parameters_yaml(file).items():
            flat[name], origin[name] = value, file
    return flat, origin


def _origin(key: str, origin: Mapping[str, Path], default: Path) -> Path:
    """The file that set ``key`` (or, for an adapter as a whole, one of its keys)."""
    if key in origin:
        return origin[key]
    return next((file for name, file in origin.items() if name.startswith(key + ".")), default)


def _variant_names() -> tuple:
    return tuple(VARIANTS)


def describe(model: GenerativeModel) -> str:
    """Factors, modalities, shapes, dependencies and labels, as ``show`` prints them."""
    lines = [f"{model.num_factors} factors, {model.num_modalities} modalities"
             + ("" if model.B is not None else " (no B: fpi only)")]
    lines.append("factors:")
    for f in range(model.num_factors):
        line = f"  {f}: {model.factor_name(f)}  {model.num_states[f]} states {model.state_label_list(f)}"
        if model.B is not None:
            deps = [model.factor_name(d) for d in model.B_dependencies[f]]
            controls = model.control_labels[f] if model.control_labels else list(range(model.num_controls[f]))
            line += f"\n       B shape {tuple(model.B[f].shape)} depends on {deps}; {model.num_controls[f]} controls {controls}"
        prior = ", ".join(f"{p:.3g}" for p in model.D[f])
        lines.append(line + f"\n       D [{prior}]")
    lines.append("modalities:")
    for i in range(model.num_modalities):
        deps = [model.factor_name(d) for d in model.A_dependencies[i]]
        lines.append(f"  {i}: {model.modality_name(i)}  {model.num_obs[i]} levels {model.observation_label_list(i)}"
                     f"\n       A shape {tuple(model.A[i].shape)} depends on {deps}")
        if model.C is not None:
            lines.append("       C [" + ", ".join(f"{c:.3g}" for c in model.C[i]) + "]")
    if model.B is not None and model.has_policy_prior:
        given = "given" if model.policies is not None else "every combination of the controls"
        lines.append(f"policies: {model.num_policies} of {model.horizon} step(s) ({given}); E "
                     + ("uniform" if model.E is None else "[" + ", ".join(f"{e:.3g}" for e in model.E[:8])
                        + (", ..." if model.E.size > 8 else "") + "]"))
    return "\n".join(lines)


def cmd_from_pymdp(args: argparse.Namespace) -> int:
    if args.output.suffix.lower() not in (".yaml", ".yml", ".npz"):
        print(f"model from-pymdp: {args.output}: expected a .yaml (params file the node reads) or .npz output",
              file=sys.stderr)
        return 2
    if args.output.exists() and not args.force:
        print(f"model from-pymdp: {args.output} exists; pass --force to replace it", file=sys.stderr)
        return 2
    try:
        model, settings = read_pymdp_file(args.input, batch_index=args.batch_index,
                                          factor_names=args.factors.split(",") if args.factors else None,
                                          modality_names=args.modalities.split(",") if args.modalities else None)
        if args.output.suffix.lower() == ".npz":
            save_model(model, args.output)
        else:  # the policy settings are node parameters: beside the model in the params file
            save_parameters_yaml(model, args.output, extra_parameters=settings)
    except ModelValidationError as exc:
        print(f"model from-pymdp: {args.input}: invalid: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}: {model.num_factors} factors {[model.factor_name(f) for f in range(model.num_factors)]}, "
          f"{model.num_modalities} modalities {[model.modality_name(i) for i in range(model.num_modalities)]}"
          + (f", {model.num_policies} policies of {model.horizon} step(s)" if model.has_policy_prior else ""))
    if settings and args.output.suffix.lower() == ".npz":
        print("the .npz holds no node parameters; set these ones: "
              + " ".join(f"-p {k}:={v}" for k, v in settings.items()))
    if args.output.suffix.lower() == ".npz":
        print(f"run it: agent_node --ros-args -p model_file:={args.output.resolve()} -p autostart:=true")
    else:  # as a params file the node reads the model and its policy.* settings
        print(f"run it: agent_node --ros-args --params-file {args.output.resolve()} -p autostart:=true")
    return 0


def _load_or_report(path: Path) -> Optional[GenerativeModel]:
    """The model in ``path``, or None after printing why it is invalid (with the conversion command when the
    file is a pymdp export)."""
    try:
        return load_model(path)
    except ModelValidationError as exc:
        hint = ""
        if path.suffix.lower() == ".npz" and "not a bayes_infer_ros model npz" in str(exc):
            hint = " (a pymdp export? convert it: bayes-infer model from-pymdp FILE -o model.yaml)"
        print(f"{path}: invalid: {exc}{hint}", file=sys.stderr)
        return None


def cmd_validate(args: argparse.Namespace) -> int:
    path = args.file
    model = _load_or_report(path)
    if model is None:
        return 1
    try:
        flat, origin = _parameters(path, args.params_file)
    except ModelValidationError as exc:
        print(f"{path}: invalid: {exc}", file=sys.stderr)
        return 1
    errors, warnings = _node_parameter_problems(flat)
    lookup, lookup_warnings = _offline_lookup()
    refusals, binding_warnings, counts = _binding_problems(flat, model, lookup)
    for line in warnings + lookup_warnings + binding_warnings:
        print(f"{path}: warning: {line}", file=sys.stderr)
    for line in errors:
        print(f"{path}: invalid: {line}", file=sys.stderr)
    for refusal in refusals:
        print(f"{_origin(refusal.key, origin, path)}: invalid: {refusal}", file=sys.stderr)
    if errors or refusals:
        return 1
    print(f"{path}: valid: {model.num_factors} factors, {model.num_modalities} modalities"
          + ("" if model.B is not None else " (no B: fpi only)")
          + "".join(f", {n} {kind}" for kind, n in counts.items() if n))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    model = _load_or_report(args.file)
    if model is None:
        return 1
    print(f"{args.file}: {describe(model)}")
    return 0


def cmd_layout(args: argparse.Namespace) -> int:
    model = _load_or_report(args.file)
    if model is None:
        return 1
    text = plotjuggler_layout([model.factor_name(f) for f in range(model.num_factors)], model.num_states,
                              args.namespace)
    args.output.write_text(text)
    print(f"wrote {args.output}: open it in PlotJuggler (Layout > Load), start the ROS2 Topic Subscriber")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bayes-infer model", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("from-pymdp", help="pymdp's A, B, C, D, E and policy settings (.npz, see "
                                             "docs/your-model.md, docs/policy.md) -> a model file")
    conv.add_argument("input", type=Path, help="the .npz saved from Python (keys A0.., B0.., C0.., D0.., E, "
                                               "A_dependencies, ...; pymdp_agent_arrays(agent))")
    conv.add_argument("-o", "--output", type=Path, required=True, help="MODEL.yaml (params file) or MODEL.npz")
    conv.add_argument("--factors", default=None, help="comma-separated factor names (default: from the file or factor_<f>)")
    conv.add_argument("--modalities", default=None, help="comma-separated modality names")
    conv.add_argument("--batch-index", type=int, default=0, help="which agent of a batched pymdp model (default 0)")
    conv.add_argument("--force", action="store_true", help="replace an existing output file")
    conv.set_defaults(run=cmd_from_pymdp)
    val = sub.add_parser("validate", help="the node's validation (model, node parameters, sensor and control "
                                          "adapters, belief events); exit 0 valid, 1 with the tensor or parameter "
                                          "and the problem")
    val.add_argument("file", type=Path, help=".yaml params file or .npz model")
    val.add_argument("--params-file", type=Path, action="append", default=[], metavar="YAML",
                     help="more parameters (e.g. config/agent_adapters.yaml), merged after FILE's as the node merges "
                          "its params files; repeatable")
    val.set_defaults(run=cmd_validate)
    show = sub.add_parser("show", help="factors, modalities, shapes, dependencies, labels")
    show.add_argument("file", type=Path)
    show.set_defaults(run=cmd_show)
    lay = sub.add_parser("layout", help="a PlotJuggler layout for the model's belief topics")
    lay.add_argument("file", type=Path)
    lay.add_argument("-o", "--output", type=Path, required=True, help="layout XML file")
    lay.add_argument("--namespace", default="", help="the node's namespace (topics <ns>/beliefs/<factor>)")
    lay.set_defaults(run=cmd_layout)
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
