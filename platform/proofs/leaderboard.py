"""A benchmark's leaderboard: every evaluation a person may see on it, beside the published figures, and
the problems each one solved.

An evaluation is a run's evaluation on the benchmark's promptset version: an evaluation run's (step 0),
or a training run's periodic ones (each at a checkpoint's step). A row is one evaluation; one whose
verdicts came from the stand-in Lean server is labelled so and ranked apart from real Lean's, never
mixed; one whose stored samples show that no answer passed the format check says so instead of "Lean". The
published rows are quoted, not measured here (promptsets.benchmarks.REFERENCE_LABEL).

The solved matrix needs the samples. Every evaluation stores them, an evaluation run's at step 0 and a
training run's periodic ones at the step they evaluated, marked apart from that step's training rollouts
(ProofAttempt.is_evaluation; the trainer publishes both kinds through one path, TrainingRun._score_all).
An evaluation published by an older trainer kept only its figures: it is a leaderboard row without a
column. Where a resumed run evaluated a step again, the latest attempt's samples count, as its figures do
(the ingester keeps the current attempt's EVALUATION). A problem is solved by an evaluation when one of its
samples earned reward 1 (our gated reward), a retry included when the evaluation made retries. A problem the
evaluation left out (its prompt over the budget, trainer/recipe/prompt_budget.py) is "not attempted", with the reason
the trainer gave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from operator import or_

from django.db.models import Max, Q

from promptsets import benchmarks
from proofs.models import ProofAttempt
from runs.evaluation_results import evaluation_report, headline_point
from runs.models import Evaluation, Run, RunKind

STANDIN_LABEL = "stand-in Lean: its verdicts decide only a small fragment; not comparable with real Lean's"
# A row whose stored samples carry no verdict: every answer failed the format check, so none was sent to Lean
# for the gated reward, and "Lean" would claim a verification that never happened. (The acc column's check,
# which skips the format gate, may still have asked Lean; its verdicts are not stored with the samples.)
NO_VERDICT_LABEL = "the format check only: no answer passed it"
NOT_RECORDED = "not recorded by the run"


@dataclass(frozen=True)
class Conditions:
    """What a leaderboard figure was measured under: without them two figures are not comparable."""

    benchmark_version: str
    lean_and_mathlib: str
    budget: str  # pass@k, rounds, tokens
    verifier: str  # compile only, or with the statement and axiom guard
    provenance: str  # measured here, or reported

    def items(self) -> list[tuple[str, str]]:
        return [("benchmark", self.benchmark_version), ("Lean and Mathlib", self.lean_and_mathlib),
                ("budget", self.budget), ("verifier", self.verifier), ("figure", self.provenance)]


def evaluation_conditions(row: "EvaluationRow") -> Conditions:
    """A row of ours: its budget and verifier from its run's resolved configuration."""
    config = row.run.config or {}
    schedule, retry = config.get("schedule") or {}, config.get("retry") or {}
    tokens = (config.get("rollout") or {}).get("max_response_tokens")
    if schedule.get("eval_error_correction") is None:
        rounds = NOT_RECORDED
    elif schedule["eval_error_correction"]:
        rounds = f"first attempt and up to {retry.get('max_rounds', 1)} round(s) of error correction"
    else:
        rounds = "first attempts only"
    k = f"pass@{row.k}" if row.k is not None else "pass@k not measured"
    allows_native_decide = (config.get("reward") or {}).get("allow_native_decide")
    verifier = benchmarks.STATEMENT_AND_AXIOM_GUARD + (" (native_decide allowed)" if allows_native_decide else "")
    return Conditions(
        benchmark_version=str(row.run.promptset_version) if row.run.promptset_version_id else NOT_RECORDED,
        # The Lean server does not report its versions to the run; the stand-in has none to report.
        lean_and_mathlib="the stand-in, not Lean" if row.is_standin else NOT_RECORDED,
        budget=f"{k}, {rounds}, answers up to {tokens:,} tokens" if tokens else f"{k}, {rounds}",
        verifier=("the stand-in's fragment only; " if row.is_standin else "Lean ") + verifier,
        provenance=benchmarks.MEASURED_HERE_LABEL,
    )


def reference_conditions(reference: dict) -> Conditions:
    """A published row (promptsets.benchmarks.PublishedResult.as_dict): its source's conditions, as stated."""
    k = f"pass@{reference['k']}" if reference["k"] is not None else "not a number of samples"
    return Conditions(
        benchmark_version=reference["benchmark_version"],
        lean_and_mathlib=f"Lean: {reference['lean_version']}; Mathlib: {reference['mathlib_version']}",
        budget=f"{k}; rounds: {reference['rounds']}; tokens: {reference['max_tokens']}",
        verifier=reference["verifier"],
        provenance=reference["label"],
    )


@dataclass
class EvaluationRow:
    evaluation: Evaluation
    run: Run
    step: int
    k: int | None
    pass_at_k: float | None
    ci95: tuple[float | None, float | None]
    pass_at_k_with_error_correction: float | None
    acc_pass_at_k: float | None
    is_standin: bool
    note: str
    has_samples: bool = False
    samples_attempt: int | None = None  # the run's attempt whose samples the column shows (the latest)
    verdicts: int | None = None  # of those samples, how many Lean (or the stand-in) gave a verdict on
    solved: dict[int, str] = field(default_factory=dict)  # problem id → "solved", "failed", "censored"
    # problem key → why the evaluation left it out (runs.models.Evaluation.not_attempted): shown as
    # "not attempted (why)", never as "–", which reads as "no sample stored".
    not_attempted: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.run.pk}:{self.step}"

    @property
    def conditions(self) -> Conditions:
        return evaluation_conditions(self)

    @property
    def verified_by(self) -> str:
        if self.is_standin:
            return "stand-in (not Lean)"
        return NO_VERDICT_LABEL if self.verdicts == 0 else "Lean"

    @property
    def label(self) -> str:
        if self.run.kind != RunKind.EVAL:
            return f"{self.run.name} (#{self.run.pk}, in-run evaluation at step {self.step})"
        checkpoint = self.run.starting_checkpoint
        model = (f"checkpoint of step {checkpoint.step} of run #{checkpoint.run_id}" if checkpoint is not None
                 else (self.run.config.get("model") or {}).get("name_or_path", "the preset's model"))
        return f"{self.run.name} (#{self.run.pk}, {model})"


def _top(curve: dict | None) -> tuple[int | None, float | None, float | None, float | None]:
    if not curve or not curve["is_measured"]:
        return None, None, None, None
    top = headline_point(curve)
    return top["k"], top["pass_at_k"], top["ci95_low"], top["ci95_high"]


def _row(evaluation: Evaluation) -> EvaluationRow:
    report = evaluation_report(evaluation.step, evaluation.values)
    k, value, low, high = _top(report.get("pass_at_k"))
    _, retried, _, _ = _top(report.get("pass_at_k_with_error_correction"))
    _, acc, _, _ = _top(report.get("acc_pass_at_k"))
    note = "" if value is not None else (report.get("pass_at_k") or {}).get("note") or "not measured"
    return EvaluationRow(
        evaluation=evaluation, run=evaluation.run, step=evaluation.step, k=k, pass_at_k=value, ci95=(low, high),
        pass_at_k_with_error_correction=retried, acc_pass_at_k=acc,
        is_standin=evaluation.values.get("standin_verdicts", 0) > 0, note=note,
        not_attempted=evaluation.not_attempted_reasons(),
    )


def _fill_solved(rows: list[EvaluationRow]) -> None:
    """Each row's samples (its run's evaluation samples of its step, of the latest attempt that made some) and
    per problem what they say; a row without any keeps ``has_samples`` False."""
    if not rows:
        return
    evaluation_samples = ProofAttempt.objects.filter(is_evaluation=True)
    latest_attempts = (evaluation_samples.filter(reduce(or_, (Q(run_id=row.run.pk, step=row.step) for row in rows)))
                       .values("run_id", "step").annotate(latest=Max("run_attempt")))
    by_evaluation = {(row.run.pk, row.step): row for row in rows}
    for found in latest_attempts:
        row = by_evaluation[(found["run_id"], found["step"])]
        row.has_samples, row.samples_attempt = True, found["latest"]
    with_samples = [row for row in rows if row.has_samples]
    if not with_samples:
        return
    attempts = (evaluation_samples.filter(reduce(or_, (
        Q(run_id=row.run.pk, step=row.step, run_attempt=row.samples_attempt) for row in with_samples)))
                .values_list("run_id", "step", "problem_id", "reward", "verdict"))
    for row in with_samples:
        row.verdicts = 0
    for run_id, step, problem_id, reward, verdict in attempts:
        row = by_evaluation[(run_id, step)]
        row.verdicts += bool(verdict)
        if problem_id is None:
            continue
        solved = row.solved
        state = "solved" if reward is not None and reward >= 1 else ("censored" if reward is None else "failed")
        if solved.get(problem_id) != "solved" and not (state == "censored" and solved.get(problem_id) == "failed"):
            solved[problem_id] = state


def leaderboard(benchmark, viewer) -> dict:
    """The page's content: the evaluation rows (real Lean first, best first; then the stand-in's), the
    published rows, the problems, and per row what it solved."""
    evaluations = (Evaluation.objects.filter(run__promptset_version_id=benchmark.version_id,
                                             run__in=Run.objects.visible_to(viewer))
                   .select_related("run__promptset_version__promptset").order_by("run_id", "step"))
    rows = [_row(evaluation) for evaluation in evaluations]
    _fill_solved(rows)

    def rank(row):
        return (row.is_standin, row.pass_at_k is None, -(row.pass_at_k or 0))

    rows.sort(key=rank)
    problems = [entry.problem for entry in benchmark.version.entries.select_related("problem").order_by("position")]
    return {
        "real_rows": [row for row in rows if not row.is_standin],
        "standin_rows": [row for row in rows if row.is_standin],
        "rows": rows,
        # Published by an older trainer, which kept an evaluation's figures and not its samples: no column.
        "figures_only": [row for row in rows if not row.has_samples],
        "references": [{**reference, "conditions": reference_conditions(reference)}
                       for reference in benchmarks.references_for(benchmark)],
        "reference_label": benchmarks.REFERENCE_LABEL,
        "standin_label": STANDIN_LABEL,
        "problems": problems,
    }


def difference(rows: list[EvaluationRow], before_key: str, after_key: str, problems) -> dict | None:
    """Problems newly solved and lost from the evaluation ``before_key`` to ``after_key`` (None if either is
    not a row with samples)."""
    by_key = {row.key: row for row in rows if row.has_samples}
    before, after = by_key.get(before_key), by_key.get(after_key)
    if before is None or after is None:
        return None
    names = {problem.pk: problem for problem in problems}
    solved_before = {pid for pid, state in before.solved.items() if state == "solved"}
    solved_after = {pid for pid, state in after.solved.items() if state == "solved"}
    return {
        "before": before, "after": after,
        "newly_solved": [names[pid] for pid in sorted(solved_after - solved_before) if pid in names],
        "lost": [names[pid] for pid in sorted(solved_before - solved_after) if pid in names],
    }
