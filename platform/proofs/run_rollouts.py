"""A run's rollouts, the proofs app's side of runs/rollouts.py: storing them as the ingester hands them
over, and the run page's list of them.

Provided when Django starts (``ProofsConfig.ready``): the runs app asks, and never imports this app.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings

from promptsets.models import Problem
from proofs import history
from proofs.models import ProofAttempt, RetryFeedback
from proofs.queries import RolloutFilters, attempt_page
from runs.models import Run, RunEvent
from trainer.observability.events import EventType, RetryCreated, RolloutFinished
from trainer.verification.verdicts import Verifier


def store(events: list[RunEvent]) -> None:
    """Inside the ingester's transaction: one ProofAttempt per ``rollout_finished``, then one RetryFeedback
    per ``retry_created`` (its first attempt may be in the same batch: stored just before)."""
    rollouts = [event for event in events if event.type == EventType.ROLLOUT_FINISHED]
    if rollouts:
        _store_attempts(rollouts)
    for event in events:
        if event.type == EventType.RETRY_CREATED:
            _store_retry(event)


def _store_retry(event: RunEvent) -> None:
    retry = RetryCreated.model_validate(event.payload)
    parent = ProofAttempt.objects.filter(run_id=event.run_id, rollout_key=retry.parent_rollout_key).first()
    RetryFeedback.objects.get_or_create(
        run_id=event.run_id, parent_rollout_key=retry.parent_rollout_key,
        defaults={"parent": parent, "feedback": retry.feedback, "created_step": retry.step},
    )


def _store_attempts(events: list[RunEvent]) -> None:
    """One ProofAttempt per rollout, linked to its problem and (for a retry) its first attempt.

    Links are resolved before the insert, so a burst of 2,048 rollouts is one INSERT, not an
    INSERT and a 2,048-row UPDATE; only a retry whose first attempt is in the same batch is
    linked after it."""
    rollouts = [(event, RolloutFinished.model_validate(event.payload)) for event in events]
    promptset_of = dict(Run.objects.filter(pk__in={e.run_id for e in events})
                        .values_list("pk", "promptset_version__promptset_id"))
    problems: dict[tuple[int, str], int] = {}
    for promptset_id in set(promptset_of.values()):
        keys = {r.problem_id for e, r in rollouts if promptset_of[e.run_id] == promptset_id}
        problems.update(((promptset_id, key), pk) for key, pk in Problem.objects.filter(
            promptset_id=promptset_id, problem_key__in=keys).values_list("problem_key", "pk"))
    parents: dict[tuple[int, str], int] = {}
    for run_id in promptset_of:
        keys = {r.parent_rollout_key for e, r in rollouts if e.run_id == run_id and r.parent_rollout_key}
        if keys:
            parents.update(((run_id, key), pk) for key, pk in ProofAttempt.objects.filter(
                run_id=run_id, rollout_key__in=keys).values_list("rollout_key", "pk"))
    judged_by_the_standin = _judged_by_the_standin(rollouts)
    rows = []
    for (event, rollout), is_standin in zip(rollouts, judged_by_the_standin, strict=True):
        rows.append(ProofAttempt(
            run_id=event.run_id, rollout_key=rollout.rollout_key, run_attempt=event.attempt, step=rollout.step,
            is_evaluation=rollout.is_evaluation,
            problem_key=rollout.problem_id, problem_name=rollout.problem_name,
            problem_id=problems.get((promptset_of[event.run_id], rollout.problem_id)),
            formal_statement=rollout.formal_statement, turn=rollout.turn,
            parent_rollout_key=rollout.parent_rollout_key or "", round=rollout.round, sample_index=rollout.sample_index,
            parent_id=parents.get((event.run_id, rollout.parent_rollout_key or "")),
            prompt=rollout.prompt, response=rollout.response, reasoning=rollout.reasoning,
            lean_code=rollout.lean_code, checked_code=rollout.checked_code,
            format_error=rollout.format_error or "", format_detail=rollout.format_detail,
            format_failure_lines=rollout.format_failure_lines, verdict=rollout.verdict or "",
            lean_messages=[m.model_dump() for m in rollout.lean_messages], reward=rollout.reward,
            reasons=rollout.reasons, is_censored=rollout.is_censored,
            is_standin_verdict=is_standin, num_tokens=rollout.num_tokens,
            is_truncated=rollout.is_truncated, generation_seconds=rollout.generation_seconds,
            verification_seconds=rollout.verification_seconds, sampling=rollout.sampling,
            policy_version=rollout.policy_version, event_id=event.pk,
            tool_calls=[call.model_dump(mode="json") for call in rollout.tool_calls],
        ))
    ProofAttempt.objects.bulk_create(rows, ignore_conflicts=True)
    unlinked = [row for row in rows if row.parent_rollout_key and row.parent_id is None]
    for row in unlinked:  # retries whose first attempt came in this same batch
        parent = ProofAttempt.objects.filter(run_id=row.run_id, rollout_key=row.parent_rollout_key).values_list(
            "pk", flat=True).first()
        if parent:
            ProofAttempt.objects.filter(run_id=row.run_id, rollout_key=row.rollout_key).update(parent_id=parent)
    # The rows this batch inserted carry its events; a rollout stored before under another event kept that one's
    # (ignore_conflicts), so only answers new to the database reach the history: each is counted once.
    inserted = list(ProofAttempt.objects.filter(event_id__in=[e.pk for e in events]).only(
        "pk", "event_id", "run_id", "step", "round", "turn", "is_evaluation", "is_standin_verdict", "reward",
        "policy_version", "problem_id", "formal_statement"))
    history.record_new_attempts(inserted)
    attempt_ids = {attempt.event_id: attempt.pk for attempt in inserted}
    for event in events:
        event.attempt_id = attempt_ids.get(event.pk)


def _judged_by_the_standin(rollouts: list[tuple[RunEvent, RolloutFinished]]) -> list[bool]:
    """Whether each answer counts as the stand-in's (``ProofAttempt.is_standin_verdict``): its run's verifier, which
    the trainer names on every answer (``verified_by``), those that reached no verifier included.

    A rollout event from a trainer older than ``verified_by`` (or from a test's injected scorer) names none, and
    its answers without a verdict (format failures) carry no stand-in label though they are the model's 0 under
    their run's verifier. Counting such an answer as a Lean verdict of a run the stand-in judges would make every
    rate of its statement read the few "Lean" rows; so it takes its run's verifier as its run's other answers say it
    (this batch's, then those stored before), and for a run none of whose answers has reached a verifier yet, the
    platform's Lean server's (LEAN_SERVER_IS_STANDIN). An answer with a verdict keeps the label it was sent with."""
    judged: dict[int, bool] = {}
    for event, rollout in rollouts:
        if rollout.verified_by is not None:
            judged.setdefault(event.run_id, rollout.verified_by == Verifier.STANDIN)
    for event, rollout in rollouts:
        if rollout.verdict is not None:
            judged.setdefault(event.run_id, rollout.is_standin_verdict)
    unknown = {event.run_id for event, rollout in rollouts
               if rollout.verified_by is None and rollout.verdict is None} - set(judged)
    if unknown:
        stored = (ProofAttempt.objects.filter(run_id__in=unknown).exclude(verdict="")
                  .order_by("run_id", "pk").distinct("run_id").values_list("run_id", "is_standin_verdict"))
        judged.update(dict(stored))
        for run_id in unknown - set(judged):
            judged[run_id] = settings.LEAN_SERVER_IS_STANDIN
    return [rollout.verified_by == Verifier.STANDIN if rollout.verified_by is not None
            else rollout.is_standin_verdict if rollout.verdict is not None
            else judged[event.run_id]
            for event, rollout in rollouts]


def attempt_ids(event_ids: Iterable[int]) -> dict[int, int]:
    """Stored event id → the id of the attempt it became."""
    return dict(ProofAttempt.objects.filter(event__in=list(event_ids)).values_list("event_id", "pk"))


def page(run: Run, query: Mapping[str, Any]) -> tuple[RolloutFilters, list[ProofAttempt], int | None]:
    """The run page's filters bound to ``query``, one page of the run's attempts, and the next page's ``before``;
    no attempts when the filters are invalid (the page shows their errors)."""
    filters = RolloutFilters(query, run=run)
    if not filters.is_valid():
        return filters, [], None
    attempts, next_before = attempt_page(run.proof_attempts.all(), filters)
    return filters, attempts, next_before
