from __future__ import annotations

from django.shortcuts import get_object_or_404
from ninja import Router, Schema

from proofs.models import ProofAttempt

router = Router(tags=["proofs"])


class ProofAttemptOut(Schema):
    id: int
    run_id: int
    rollout_key: str
    step: int
    problem_key: str
    turn: str
    parent_id: int | None
    reasoning: str
    lean_code: str
    format_error: str
    verdict: str
    lean_messages: list
    reward: float | None
    reasons: list
    is_censored: bool
    is_standin_verdict: bool
    num_tokens: int


@router.get("/runs/{run_id}/attempts", response=list[ProofAttemptOut])
def list_attempts(request, run_id: int, after_id: int = 0, limit: int = 200):
    attempts = ProofAttempt.objects.visible_to(request.user).filter(run_id=run_id, pk__gt=after_id).order_by("pk")
    return attempts[: min(max(limit, 1), 1000)]


@router.get("/attempts/{attempt_id}", response=ProofAttemptOut)
def get_attempt(request, attempt_id: int):
    return get_object_or_404(ProofAttempt.objects.visible_to(request.user), pk=attempt_id)
