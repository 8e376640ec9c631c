"""The step-time model against a measured run: fit its inputs from the run's events, predict, compare.

``fit_inputs`` reads what every run's events carry, in the synchronous loop and the asynchronous one
alike: each training rollout's ``num_tokens``, ``generation_seconds`` (from its batch's start to the
answer) and ``verification_seconds``, and each step's ``time/learning_s`` and ``time/weight_sync_s``.
It fits, for the whole run:

- the decode speed of one sequence and the prefill, by least squares of ``generation_seconds`` on
  ``num_tokens`` (an answer of L tokens is written at prefill + L / speed);
- the answer lengths, as the observed ones (resampled);
- Lean: the share of answers that reached it, and the latencies' mean, spread and share at the timeout;
- the learner's tokens per second, as all answers' tokens over all learning seconds (the prompts' work
  is inside that rate: the events do not count prompt tokens);
- the weight sync, and the step's bookkeeping: what a synchronous step took beyond its phases.

``calibrate`` then simulates the run's own η and layout with those inputs, and compares the predicted
step time with the measured one (the mean interval between consecutive ``metrics`` events: one per
finished step). It also does so out of sample: inputs fitted on the odd steps predict the even ones,
and the other way round, so the error is not only the fit reproducing its own data.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from trainer.command_line import EXIT_MALFORMED_INPUT, CommandError
from trainer.step_time.simulation import SHARED_CPU_NOTE, AnswerLengths, LeanLatency, Layout, StepTimeInputs, simulate

SEEDS = 20  # simulations averaged per prediction: answer lengths and latencies are drawn


def read_events(path: str | Path) -> list[dict]:
    """A run's events, one JSON object a line (``python -m trainer run`` writes them to stdout)."""
    events = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise CommandError(f"{path} line {number}: not JSON ({error.msg}); give the events a run printed, "
                               "one JSON object a line", EXIT_MALFORMED_INPUT) from None
    return events


@dataclass
class MeasuredRun:
    config: dict
    eta: int
    steps: list[int]
    step_intervals_s: dict[int, float]  # step → seconds from the previous step's metrics to its own
    phases: dict[int, dict]  # step → the metrics' time/* values
    rollouts: list[dict]  # training rollouts' payloads


def measured_run(events: list[dict]) -> MeasuredRun:
    started = [event for event in events if event.get("type") == "run_started"]
    if not started:
        raise CommandError("no run_started event: give the events of a training run", EXIT_MALFORMED_INPUT)
    config = started[-1]["payload"].get("config") or {}
    metrics = [event for event in events if event.get("type") == "metrics" and event.get("attempt") == started[-1].get("attempt")]
    metrics.sort(key=lambda event: event["payload"]["step"])
    if len(metrics) < 3:
        raise CommandError(f"the run has {len(metrics)} metrics event(s); the model needs at least 3 steps to compare "
                           "step times", EXIT_MALFORMED_INPUT)
    intervals = {}
    for previous, current in zip(metrics, metrics[1:]):
        if current["payload"]["step"] == previous["payload"]["step"] + 1:
            intervals[current["payload"]["step"]] = current["time"] - previous["time"]
    rollouts = [event["payload"] for event in events if event.get("type") == "rollout_finished"
                and not event["payload"].get("is_evaluation")]
    return MeasuredRun(
        config=config,
        eta=int((config.get("rollout") or {}).get("max_staleness") or 0),
        steps=[event["payload"]["step"] for event in metrics],
        step_intervals_s=intervals,
        phases={event["payload"]["step"]: event["payload"]["values"] for event in metrics},
        rollouts=rollouts,
    )


def fit_inputs(events_or_run, *, steps: set[int] | None = None, source: str = "the events file") -> StepTimeInputs:
    """The model's inputs fitted from a measured run (only ``steps`` of it, when given)."""
    run = events_or_run if isinstance(events_or_run, MeasuredRun) else measured_run(events_or_run)
    # The first step carries one-time costs (first calls, allocations) and has no interval before it: left out.
    chosen = set(run.step_intervals_s) if steps is None else set(steps)
    rollouts = [r for r in run.rollouts if r.get("step") in chosen and r.get("num_tokens")]
    phases = [run.phases[step] for step in run.steps if step in chosen]
    rollout_config = run.config.get("rollout") or {}
    verifier_config = run.config.get("verifier") or {}
    timeout_s = float(verifier_config.get("timeout_s") or 60.0)
    rollouts_per_step = int(rollout_config.get("prompts_per_step", 1)) * int(rollout_config.get("samples_per_prompt", 1))
    needed = ("time/generation_s", "time/verification_tail_s", "time/learning_s", "time/weight_sync_s")
    missing = sorted({name for values in phases for name in needed if not isinstance(values.get(name), (int, float))})
    if missing:
        raise CommandError(f"{source}: its metrics events lack {', '.join(missing)}; the model needs a run that reports "
                           "each step's time splits", EXIT_MALFORMED_INPUT)
    if not rollouts or not phases:
        raise CommandError(f"{source}: no training rollouts with num_tokens in steps {sorted(chosen)}",
                           EXIT_MALFORMED_INPUT)

    prefill_s, seconds_per_token = _least_squares([r["num_tokens"] for r in rollouts],
                                                  [r["generation_seconds"] for r in rollouts])
    if seconds_per_token <= 0 or prefill_s < 0:  # a fit with no meaning: fall back to the plain rate
        prefill_s = 0.0
        seconds_per_token = sum(r["generation_seconds"] for r in rollouts) / sum(r["num_tokens"] for r in rollouts)

    reached = [r for r in rollouts if r.get("verdict") is not None]
    latencies = [r["verification_seconds"] for r in reached]
    at_timeout = [s for s in latencies if s >= 0.99 * timeout_s]
    below = [s for s in latencies if s < 0.99 * timeout_s]
    positive = [s for s in below if s > 0]
    sigma = statistics.pstdev(math.log(s) for s in positive) if len(positive) >= 3 else 0.0
    latency = LeanLatency(mean_s=statistics.fmean(below) if below else 0.0, sigma=sigma,
                          timeout_share=len(at_timeout) / len(latencies) if latencies else 0.0)

    answer_tokens = sum(r["num_tokens"] for r in rollouts)
    learning_s = sum(p["time/learning_s"] for p in phases)
    step_tokens = answer_tokens / len(phases)
    sync_s = statistics.fmean(p["time/weight_sync_s"] for p in phases)
    overheads = []
    if run.eta == 0:  # a synchronous step is its phases plus the bookkeeping between them
        for step, values in run.phases.items():
            if step in chosen and step in run.step_intervals_s:
                phases_s = sum(values[name] for name in ("time/generation_s", "time/verification_tail_s",
                                                         "time/learning_s", "time/weight_sync_s"))
                overheads.append(max(run.step_intervals_s[step] - phases_s, 0.0))
    overhead_s = statistics.fmean(overheads) if overheads else 0.0
    where = f"measured: {source}, steps {min(chosen)}–{max(chosen)}" + ("" if steps is None else f" ({len(chosen)} of them)")
    return StepTimeInputs(
        rollouts_per_step=rollouts_per_step,
        answer_tokens=AnswerLengths(answer_tokens / len(rollouts), max_tokens=int(rollout_config.get("max_response_tokens") or 1 << 30),
                                    observed=tuple(r["num_tokens"] for r in rollouts)),
        decode_tokens_per_s_per_sequence=1 / seconds_per_token,
        # Both engines decode a CPU step's answers together (vLLM: its key/value cache holds them all); the measured
        # speed is per sequence at that size.
        concurrent_sequences_per_device=rollouts_per_step,
        prefill_s=prefill_s,
        lean_latency=latency,
        lean_timeout_s=timeout_s,
        lean_max_in_flight=int(verifier_config.get("max_in_flight") or 64),
        lean_reach_share=len(reached) / len(rollouts),
        learner_tokens_per_s_per_device=step_tokens * len(phases) / learning_s if learning_s > 0 else 1e9,
        prompt_tokens_mean=0.0,
        learner_fixed_s=0.0,
        weight_sync_s=sync_s,
        step_overhead_s=overhead_s,
        sources={
            "rollouts_per_step": f"{where}: {rollouts_per_step} rollouts a step",
            "answer_tokens": f"{where}: the {len(rollouts)} answers' lengths (num_tokens), resampled; mean "
                             f"{answer_tokens / len(rollouts):.0f} tokens",
            "decode_tokens_per_s_per_sequence": f"{where}: least squares of the answers' generation_seconds on num_tokens: "
                                                f"{1 / seconds_per_token:.2f} tokens/s per sequence",
            "concurrent_sequences_per_device": f"{where}: the whole batch decoded at once (the run's engine, "
                                               f"{rollout_config.get('engine', 'not recorded')}, decodes a step's "
                                               f"{rollouts_per_step} answers together)",
            "prefill_s": f"{where}: the same fit's intercept, {prefill_s:.2f} s",
            "lean_latency": f"{where}: {len(reached)} answers reached Lean; verification_seconds mean {latency.mean_s:.3f} s, "
                            f"sigma of log {latency.sigma:.2f}, {latency.timeout_share:.0%} at the timeout",
            "lean_timeout_s": f"{where}: the run's verifier.timeout_s",
            "lean_max_in_flight": f"{where}: the run's verifier.max_in_flight",
            "lean_reach_share": f"{where}: {len(reached)} of {len(rollouts)} answers passed the format check",
            "learner_tokens_per_s_per_device": f"{where}: answer tokens / time/learning_s = {answer_tokens} / "
                                               f"{learning_s:.1f} s (prompts' work inside the rate)",
            "prompt_tokens_mean": "measured: inside the learner's rate (the events count answer tokens only)",
            "learner_fixed_s": "measured: inside the learner's rate",
            "learner_attention_per_context_token": "measured: inside the learner's rate, at the run's own lengths",
            "weight_sync_s": f"{where}: mean time/weight_sync_s",
            "step_overhead_s": (f"{where}: mean step interval minus its four phases" if overheads else
                                "measured: not separable in an asynchronous run; 0"),
        },
    )


def _least_squares(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of y ≈ intercept + slope·x."""
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return 0.0, mean_y / mean_x if mean_x else 0.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread
    return mean_y - slope * mean_x, slope


def predicted_step_time(inputs: StepTimeInputs, eta: int, layout: Layout, steps: int) -> float:
    """The mean interval between steps' ends after the first, as the run's metrics events measure it, over SEEDS
    simulations (their draws differ)."""
    return statistics.fmean(simulate(inputs, eta, layout, steps=max(steps, 2), seed=seed).mean_interval_after(1)
                            for seed in range(SEEDS))


@dataclass
class Calibration:
    source: str
    eta: int
    steps: int
    measured_step_s: float
    predicted_step_s: float
    held_out: list[dict]  # {"fit_on", "predict", "measured_step_s", "predicted_step_s", "error"}
    inputs: StepTimeInputs

    @property
    def error(self) -> float:
        return self.predicted_step_s / self.measured_step_s - 1

    def to_json(self) -> dict:
        return {
            "events": self.source, "max_staleness": self.eta, "steps": self.steps,
            "measured_step_s": round(self.measured_step_s, 3), "predicted_step_s": round(self.predicted_step_s, 3),
            "error": round(self.error, 4), "held_out": self.held_out,
            "inputs_sources": self.inputs.sources,
        }


def calibrate(path: str | Path, layout: Layout | None = None) -> Calibration:
    """The model's step time for the run in ``path`` (its own η, inputs fitted from it) against the measured one."""
    source = str(path)
    run = measured_run(read_events(path))
    cluster = run.config.get("cluster") or {}
    if layout is None:
        gpus, rollout_gpus = int(cluster.get("num_gpus") or 0), int(cluster.get("rollout_gpus") or 0)
        if gpus == 0:
            layout = Layout(True, 1, 1, SHARED_CPU_NOTE)
        elif rollout_gpus:
            layout = Layout(False, rollout_gpus, gpus - rollout_gpus)
        else:
            layout = Layout(True, gpus, gpus)
    inputs = fit_inputs(run, source=source)
    measured = [run.step_intervals_s[s] for s in sorted(run.step_intervals_s)]
    predicted = predicted_step_time(inputs, run.eta, layout, len(run.steps))

    held_out = []
    odd = {s for s in run.step_intervals_s if s % 2}
    even = set(run.step_intervals_s) - odd
    for fit_on, predict_on, name in ((odd, even, ("odd", "even")), (even, odd, ("even", "odd"))):
        targets = [run.step_intervals_s[s] for s in sorted(predict_on) if s in run.step_intervals_s]
        if not fit_on or not targets:
            continue
        half = fit_inputs(run, steps=fit_on, source=source)
        half_prediction = predicted_step_time(half, run.eta, layout, len(run.steps))
        measured_half = statistics.fmean(targets)
        held_out.append({"fit_on": f"{name[0]} steps", "predict": f"{name[1]} steps",
                         "measured_step_s": round(measured_half, 3), "predicted_step_s": round(half_prediction, 3),
                         "error": round(half_prediction / measured_half - 1, 4)})
    return Calibration(source, run.eta, len(run.steps), statistics.fmean(measured), predicted, held_out, inputs)
