"""``python -m trainer step-time``: predicted step time and GPU idle shares for η = 0, 1, 2 (a simulation)."""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace

from trainer.command_line import CommandError, existing_file
from trainer.commands.run import add_config_arguments, resolve_config
from trainer.step_time.calibration import calibrate
from trainer.node_layout import (
    WEIGHT_PUSH,
    LayoutError,
    add_node_layout_arguments,
    cross_node_traffic,
    format_traffic,
    node_layout_from,
    percent,
    placement_for,
    rerun_words,
)
from trainer.step_time.inputs import (
    RECIPE_STEP_MINUTES,
    RECIPE_STEP_SOURCE,
    layout_for,
    model_bytes,
    preset_inputs,
    step_shape,
    with_cross_node_traffic,
)
from trainer.step_time.simulation import LeanLatency, simulate

DEFAULT_ETAS = (0, 1, 2)
SEEDS = 5  # simulations averaged per prediction (answer lengths and latencies are drawn)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--eta", default=None, metavar="LIST",
                        help="Staleness bounds η (rollout.max_staleness) to predict, comma-separated (default: 0,1,2 "
                             "and the config's own).")
    parser.add_argument("--steps", type=int, default=40, help="Steps simulated per prediction (default: 40).")
    parser.add_argument("--lean-mean-s", type=float, default=None,
                        help="Lean's mean latency in seconds, instead of the preset's input (e.g. the stand-in's "
                             "--latency-ms / 1000).")
    parser.add_argument("--lean-sigma", type=float, default=None,
                        help="Spread of Lean's log-normal latency (the stand-in's --latency-sigma).")
    parser.add_argument("--lean-timeout-share", type=float, default=None,
                        help="Share of proofs that run to verifier.timeout_s (the stand-in's --timeout-share).")
    parser.add_argument("--lean-reach-share", type=float, default=None,
                        help="Share of answers that pass the format check and go to Lean, instead of the preset's "
                             "input (cpu-smoke's measured run reached Lean with none).")
    add_node_layout_arguments(parser)
    parser.add_argument("--calibrate", default=None, metavar="EVENTS.jsonl",
                        help="Instead: fit the inputs from a run's events, predict that run's own step time and "
                             "print the error against the measured one.")
    parser.add_argument("--json", action="store_true",
                        help='Print {"preset", "predictions": [{"max_staleness", "step_time_s", '
                             '"generation_idle_share", "learner_idle_share", "gpu_idle_share", "layout", …}], '
                             '"inputs": {name: {"value", "source"}}, "recipe"} instead of the table.')


def main(args: argparse.Namespace) -> int:
    if args.calibrate:
        return _calibrate(args)

    config = resolve_config(args)
    etas = _etas(args.eta, config.rollout.max_staleness)
    if args.steps < 2:
        raise CommandError(f"--steps {args.steps}: the step time is the interval between steps; give 2 or more")
    inputs = _with_lean_latency(preset_inputs(config), args)
    traffic = _cross_node_traffic(args, config, inputs)
    if traffic is not None:
        inputs = with_cross_node_traffic(inputs, traffic)
    predictions = [predict(config, inputs, eta, args.steps) for eta in etas]
    if traffic is not None:
        _add_network_shares(predictions, traffic, config)
    report = {
        "preset": config.preset,
        "what": "a prediction of the step-time model (trainer/step_time/), not a measurement",
        "predictions": predictions,
        "inputs": {name: {"value": _value(getattr(inputs, name)), "source": inputs.sources.get(name, "")}
                   for name in _input_names(inputs)},
        "recipe": _recipe(config),
        "cross_node": traffic.as_dict() if traffic is not None else None,
        "rerun": _rerun(args, config),
    }
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_report(report, traffic))
    return 0


def _cross_node_traffic(args, config, inputs):
    """What crosses the network each step on the layout the options name; None without them."""
    try:
        layout = node_layout_from(args, config)
        if layout is None:
            return None
        placement = placement_for(config, layout)
    except LayoutError as error:
        raise CommandError(str(error)) from None
    shape = step_shape(config, inputs, learner_ranks=len(placement.learner_rank_nodes))
    return cross_node_traffic(placement, model_bytes(config), shape)


def _add_network_shares(predictions: list[dict], traffic, config) -> None:
    """Each prediction's share of its step spent on the network, where the row runs the placed layout (a split the
    model chose for η ≥ 1 with cluster.rollout_gpus 0 is another layout: its row says so)."""
    for row in predictions:
        if not row["runs"]:
            continue
        if row["layout"]["shared"] != (config.cluster.rollout_gpus == 0):
            row["cross_node"] = {"note": "the cross-node traffic is predicted for the config's own layout "
                                         f"(cluster.rollout_gpus {config.cluster.rollout_gpus}), not this split"}
            continue
        step, pushing = row["step_time_s"], traffic.crossing(WEIGHT_PUSH).seconds_per_step
        row["cross_node"] = {
            "what": "predicted share of this predicted step spent moving bytes between nodes",
            "weight_push_s": _value(pushing),
            "weight_push_share": _value(pushing / step),  # 4 significant digits: a small share must not read 0
            "total_s": _value(traffic.seconds_per_step),
            "total_share": _value(traffic.seconds_per_step / step),
        }


def predict(config, inputs, eta: int, steps: int) -> dict:
    """η's predicted step time and idle shares (the mean of SEEDS simulations), or why it cannot run."""
    def fastest(layouts):
        return min(layouts, key=lambda layout: simulate(inputs, eta, layout, steps=steps, seed=0).step_time_s)

    try:
        layout, reason = layout_for(config, eta, best_split=fastest)
    except ValueError as error:
        raise CommandError(str(error)) from None
    if layout is None:
        return {"max_staleness": eta, "runs": False, "reason": reason}
    try:
        results = [simulate(inputs, eta, layout, steps=steps, seed=seed) for seed in range(SEEDS)]
    except ValueError as error:
        raise CommandError(f"step-time: {error}") from None
    def mean(name: str) -> float:
        return statistics.fmean(getattr(result, name) for result in results)

    staleness = [batch.staleness for result in results for batch in result.batches]
    return {
        "max_staleness": eta,
        "runs": True,
        "step_time_s": round(mean("step_time_s"), 3),
        "generation_idle_share": round(mean("generation_idle_share"), 4),
        "learner_idle_share": round(mean("learner_idle_share"), 4),
        "gpu_idle_share": round(mean("devices_idle_share"), 4),
        "staleness_mean": round(statistics.fmean(staleness), 3) if staleness else 0.0,
        "layout": {"shared": layout.shared, "generation_devices": layout.generation_devices,
                   "learner_devices": layout.learner_devices, "note": layout.note},
    }


def _etas(text: str | None, configured: int) -> list[int]:
    if text is None:
        return sorted({*DEFAULT_ETAS, configured})
    try:
        etas = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--eta {text!r}: give whole numbers separated by commas, e.g. --eta 0,1,2") from None
    if not etas or any(eta < 0 for eta in etas):
        raise CommandError(f"--eta {text!r}: η is 0 or more (0 is the synchronous loop); e.g. --eta 0,1,2")
    return sorted(set(etas))


def _with_lean_latency(inputs, args):

    given = {"mean_s": args.lean_mean_s, "sigma": args.lean_sigma, "timeout_share": args.lean_timeout_share}
    if args.lean_reach_share is not None:
        if not 0 <= args.lean_reach_share <= 1:
            raise CommandError(f"--lean-reach-share {args.lean_reach_share:g}: a share of the answers, between 0 and 1")
        inputs = replace(inputs, lean_reach_share=args.lean_reach_share,
                         sources={**inputs.sources, "lean_reach_share": f"given on the command line: "
                                  f"{args.lean_reach_share:.0%} of answers reach Lean"})
    if all(value is None for value in given.values()):
        return inputs
    latency = inputs.lean_latency
    changed = LeanLatency(**{name: getattr(latency, name) if value is None else value for name, value in given.items()})
    try:
        changed.distribution(0)  # its own checks: a negative mean, a share outside 0..1
    except ValueError as error:
        raise CommandError(f"--lean-mean-s/--lean-sigma/--lean-timeout-share: {error}") from None
    sources = dict(inputs.sources)
    sources["lean_latency"] = (f"given on the command line: log-normal, mean {changed.mean_s:g} s, sigma {changed.sigma:g}, "
                               f"{changed.timeout_share:.0%} running to the timeout")
    return replace(inputs, lean_latency=changed, sources=sources)


def _rerun(args, config) -> str:
    words = ["python -m trainer step-time --preset", config.preset, *(f"--set {pair}" for pair in args.overrides)]
    for option in ("lean_mean_s", "lean_sigma", "lean_timeout_share", "lean_reach_share"):
        if getattr(args, option) is not None:
            words.append(f"--{option.replace('_', '-')} {getattr(args, option):g}")
    words += rerun_words(node_layout_from(args, config))
    return " ".join(words)


def _recipe(config) -> dict | None:

    if config.preset != "h100x8":
        return None
    return {"step_time_s": round(RECIPE_STEP_MINUTES * 60, 1), "source": RECIPE_STEP_SOURCE}


def _input_names(inputs) -> list[str]:
    return [name for name in inputs.__dataclass_fields__ if name != "sources"]


def _value(value):
    """An input as JSON: a distribution's settings (measured lengths as their count), a number to 4 significant
    digits (a small share must not print as 0)."""
    if hasattr(value, "__dataclass_fields__"):
        shown = {name: getattr(value, name) for name in value.__dataclass_fields__ if name != "observed"}
        if getattr(value, "observed", None):
            shown["observed_count"] = len(value.observed)
        return shown
    return float(f"{value:.4g}") if isinstance(value, float) else value


def format_report(report: dict, traffic=None) -> str:
    lines = [f"step-time model, preset {report['preset']}: PREDICTED step time and idle shares (a simulation, "
             "not a measurement)", ""]
    lines.append(f"{'η':>3}  {'step time':>14}  {'generation idle':>15}  {'learner idle':>12}  {'GPU idle':>8}  layout")
    for row in report["predictions"]:
        if not row["runs"]:
            lines.append(f"{row['max_staleness']:>3}  cannot run: {row['reason']}")
            continue
        lines.append(f"{row['max_staleness']:>3}  {_duration(row['step_time_s']):>14}  {row['generation_idle_share']:>15.0%}  "
                     f"{row['learner_idle_share']:>12.0%}  {row['gpu_idle_share']:>8.0%}  {row['layout']['note']}")
    if report["recipe"]:
        lines += ["", f"beside it: the recipe's measured pace, {_duration(report['recipe']['step_time_s'])} a step "
                      f"({report['recipe']['source']})"]
    if traffic is not None:
        lines += [""] + format_traffic(traffic) + [
            f"  share of the predicted step, η = {row['max_staleness']}: weight push "
            f"{percent(row['cross_node']['weight_push_share'])}, all cross-node traffic "
            f"{percent(row['cross_node']['total_share'])}"
            for row in report["predictions"] if row.get("cross_node", {}).get("total_share") is not None]
    lines += ["", "inputs:"]
    for name, item in report["inputs"].items():
        lines.append(f"  {name} = {item['value']}\n      {item['source']}")
    lines += ["", f"rerun: {report['rerun']}"]
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 120 else f"{seconds:.0f} s ({seconds / 60:.1f} min)"


def _calibrate(args: argparse.Namespace) -> int:

    path = existing_file(args.calibrate, "--calibrate")
    result = calibrate(path)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return 0
    lines = [f"step-time model against {result.source} (η = {result.eta}, {result.steps} steps, inputs fitted from the run):",
             f"  measured mean step time {result.measured_step_s:.2f} s; predicted {result.predicted_step_s:.2f} s "
             f"({result.error:+.1%})"]
    for row in result.held_out:
        lines.append(f"  out of sample: fitted on the {row['fit_on']}, predicting the {row['predict']}: measured "
                     f"{row['measured_step_s']:.2f} s, predicted {row['predicted_step_s']:.2f} s ({row['error']:+.1%})")
    lines.append("inputs:")
    for name, source in result.inputs.sources.items():
        lines.append(f"  {name}: {source}")
    print("\n".join(lines))
    return 0
