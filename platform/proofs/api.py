from __future__ import annotations

from django.shortcuts import get_object_or_404
from ninja import Query, Router, Schema
from ninja.errors import HttpError

from config.api_schemas import StrictSchema, refuse_unknown_fields
from promptsets.export import UnknownExportFormat
from promptsets.lean_view import code_view
from proofs import export
from proofs.models import ProofAttempt
from proofs.queries import RolloutFilters, attempt_page, filter_attempts
from runs.models import Run
from trainer.observability import token_records

router = Router(tags=["proofs"])


class ProofAttemptOut(Schema):
    id: int
    run_id: int
    rollout_key: str
    step: int
    is_evaluation: bool
    problem_key: str
    turn: str
    parent_id: int | None
    reasoning: str
    lean_code: str
    response: str
    format_error: str
    format_detail: str
    format_failure_lines: list
    verdict: str
    lean_messages: list
    reward: float | None
    reasons: list
    is_censored: bool
    is_standin_verdict: bool
    num_tokens: int
    policy_version: int | None
    round: int
    tool_calls: list


class RolloutCardOut(Schema):
    """A rollout in the shape the run's WebSocket delivers it, so one renderer draws both."""

    attempt_id: int
    rollout_key: str
    step: int
    is_evaluation: bool
    problem_id: str
    problem_name: str
    turn: str
    verdict: str | None
    format_error: str | None
    reward: float | None
    reasons: list
    is_censored: bool
    is_standin_verdict: bool
    reasoning: str
    lean_code: str
    lean_messages: list
    policy_version: int | None
    parent_rollout_key: str
    round: int
    tool_calls: list
    earlier_rounds: list


class RolloutPageOut(Schema):
    rollouts: list[RolloutCardOut]
    next_before: int | None


class RolloutFiltersIn(StrictSchema):
    step: int | None = None
    step_from: int | None = None
    step_to: int | None = None
    purpose: str = ""
    turn: str = ""
    verdict: str = ""
    format_error: str = ""
    problem: str = ""
    reward: str = ""
    round: int | None = None
    policy_version: int | None = None
    min_tokens: int | None = None
    max_tokens: int | None = None
    truncated: str = ""
    text: str = ""
    mismatch: str = ""
    before: int | None = None
    limit: int | None = None


def card(attempt: ProofAttempt) -> dict:
    return {
        "attempt_id": attempt.pk, "rollout_key": attempt.rollout_key, "step": attempt.step,
        "is_evaluation": attempt.is_evaluation,
        "problem_id": attempt.problem_key, "problem_name": attempt.problem_name, "turn": attempt.turn,
        "verdict": attempt.verdict or None, "format_error": attempt.format_error or None, "reward": attempt.reward,
        "reasons": attempt.reasons, "is_censored": attempt.is_censored, "is_standin_verdict": attempt.is_standin_verdict,
        "reasoning": attempt.reasoning, "lean_code": attempt.lean_code, "lean_messages": attempt.lean_messages,
        "policy_version": attempt.policy_version, "parent_rollout_key": attempt.parent_rollout_key,
        "round": attempt.round, "tool_calls": attempt.tool_calls,
        # The rounds of correction before this one (proofs.queries.attach_earlier_rounds), for the card's trajectory.
        "earlier_rounds": getattr(attempt, "earlier_rounds", []),
    }


@router.get("/runs/{run_id}/attempts", response=list[ProofAttemptOut])
def list_attempts(request, run_id: int, after_id: int = 0, limit: int = 200):
    run = get_object_or_404(Run.objects.visible_to(request.user), pk=run_id)  # 404, as every route naming a run
    attempts = ProofAttempt.objects.visible_to(request.user).filter(run=run, pk__gt=after_id).order_by("pk")
    return attempts[: min(max(limit, 1), 1000)]


@router.get("/runs/{run_id}/rollouts", response=RolloutPageOut)
def list_rollouts(request, run_id: int, filters: Query[RolloutFiltersIn]):
    """The proof viewer's list: newest first, filtered; ``next_before`` pages further back."""
    refuse_unknown_fields(request.GET, RolloutFiltersIn)
    run = get_object_or_404(Run.objects.visible_to(request.user), pk=run_id)
    form = RolloutFilters({k: v for k, v in filters.dict().items() if v not in (None, "")}, run=run)
    if not form.is_valid():
        raise HttpError(422, "invalid rollout filters: " + "; ".join(
            f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()))
    attempts, next_before = attempt_page(run.proof_attempts.all(), form)
    return {"rollouts": [card(a) for a in attempts], "next_before": next_before}


class RolloutExportIn(RolloutFiltersIn):
    format: str = "jsonl"


@router.get("/runs/{run_id}/steps/{step}/rollouts/export")
def export_rollouts(request, run_id: int, step: int, filters: Query[RolloutExportIn]):
    """One step's rollouts, narrowed by the list's other filters, as JSON Lines or Parquet (``format``), oldest
    first; verl's rollout-dump columns first."""
    refuse_unknown_fields(request.GET, RolloutExportIn)
    run = get_object_or_404(Run.objects.visible_to(request.user), pk=run_id)
    chosen = {k: v for k, v in filters.dict().items() if v not in (None, "") and k not in ("format", "before", "limit")}
    form = RolloutFilters({**chosen, "step": step}, run=run)
    if not form.is_valid():
        raise HttpError(422, "invalid rollout filters: " + "; ".join(
            f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()))
    try:
        return export.export_response(run, step, filter_attempts(run.proof_attempts.all(), form), filters.format)
    except UnknownExportFormat as error:
        raise HttpError(422, str(error)) from error


@router.get("/attempts/{attempt_id}", response=ProofAttemptOut)
def get_attempt(request, attempt_id: int):
    return get_object_or_404(ProofAttempt.objects.visible_to(request.user), pk=attempt_id)


@router.get("/attempts/{attempt_id}/code", response=dict)
def attempt_code(request, attempt_id: int):
    """The Lean code as highlighted tokens per line, with Lean's messages (columns in code points)."""
    attempt = get_object_or_404(ProofAttempt.objects.visible_to(request.user), pk=attempt_id)
    return code_view(attempt.checked_code, attempt.lean_messages, attempt.lean_code)


class TokenRecordsOut(Schema):
    """One rollout's tokens with the learner's figures, column by column (a list per figure, one value a token)."""

    attempt_id: int
    rollout_key: str
    step: int
    is_recorded: bool
    # recorded; pending: not written yet (the step's file is written in the background after its learner step, so a
    # live run's newest step has none for a while: ask again); not_recorded: never will be, ``reason`` says why.
    state: token_records.RecordsState
    reason: str
    advantage: float | None
    ratio_outside_tokens: int | None
    flag_bits: dict[str, int]
    tokens: dict[str, list]


TOKEN_COLUMNS = ("token_texts", "token_ids", "engine_logprob", "learner_logprob", "entropy", "loss_weight", "flags")


@router.get("/attempts/{attempt_id}/tokens", response=TokenRecordsOut)
def attempt_tokens(request, attempt_id: int):
    """The rollout's per-token records as the learner used them; ``is_recorded`` false (and no tokens) where
    none are written, which is never drawn as zeros, with ``state`` saying whether they are still to come."""
    attempt = get_object_or_404(ProofAttempt.objects.visible_to(request.user).select_related("run"), pk=attempt_id)
    looked_up = attempt.look_up_token_records()
    record = looked_up.record
    return {
        "attempt_id": attempt.pk, "rollout_key": attempt.rollout_key, "step": attempt.step,
        "is_recorded": record is not None, "state": looked_up.state.value, "reason": looked_up.reason,
        "advantage": None if record is None else record["advantage"],
        "ratio_outside_tokens": None if record is None else record["ratio_outside_tokens"],
        "flag_bits": {name: bit for bit, name in token_records.FLAG_NAMES.items()},
        "tokens": {} if record is None else {name: record[name] for name in TOKEN_COLUMNS},
    }
