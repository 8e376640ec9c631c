"""What runs learned about promptsets' problems, from the proof attempts this app stores.

The promptsets app asks for it through promptsets/results.py, which this app provides when Django
starts (``ProofsConfig.ready``): promptsets sits below proofs and never imports it.
"""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Count, Max, Min, Q

from promptsets.models import Problem
from promptsets.results import STANDIN, VERIFIED_BY
from proofs.models import ProofAttempt, Turn


def win_rates(problem_ids, *, viewer, verified_by: str = "lean") -> dict[int, tuple[int, int]]:
    """Problem id -> (accepted, scored) over the first attempts of the runs ``viewer`` may see; censored excluded.

    ``verified_by``: "lean" counts real Lean's verdicts only, "stand-in" the stand-in server's only; never both
    together, since the stand-in decides only a small fragment (promptsets.results.VERIFIED_BY).

    Only visible runs count (Run.visible_to): others' private results never pool into what a person sees.

    First attempts only: a retry sees Lean's feedback, so its success says less about how
    hard the statement is. Censored attempts (verifier outages, stand-in "cannot decide") have
    no reward and are not counted as wrong; a Lean timeout scored 0 and counts as wrong.
    """
    problem_ids = list(problem_ids)
    totals: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    if verified_by not in VERIFIED_BY:
        raise ValueError(f"verified_by must be one of {', '.join(VERIFIED_BY)}, got {verified_by!r}")
    scored = ProofAttempt.objects.visible_to(viewer).filter(
        turn=Turn.FIRST, reward__isnull=False, is_standin_verdict=verified_by == STANDIN)
    by_foreign_key = (
        scored.filter(problem_id__in=problem_ids).values("problem_id")
        .annotate(accepted=Count("id", filter=Q(reward__gte=1)), scored=Count("id"))
    )
    for row in by_foreign_key:
        totals[row["problem_id"]][0] += row["accepted"]
        totals[row["problem_id"]][1] += row["scored"]
    # Attempts the ingester could not link to a Problem row still name the problem by key.
    keys = {
        (promptset_id, key): pk
        for pk, promptset_id, key in Problem.objects.filter(pk__in=problem_ids).values_list("pk", "promptset_id", "problem_key")
    }
    by_key = (
        scored.filter(problem__isnull=True, problem_key__in={key for _, key in keys})
        .values("run__promptset_version__promptset_id", "problem_key")
        .annotate(accepted=Count("id", filter=Q(reward__gte=1)), scored=Count("id"))
    )
    for row in by_key:
        pk = keys.get((row["run__promptset_version__promptset_id"], row["problem_key"]))
        if pk is not None:
            totals[pk][0] += row["accepted"]
            totals[pk][1] += row["scored"]
    return {pk: (accepted, total) for pk, (accepted, total) in totals.items()}


def attempt_history(problem: Problem, viewer):
    """Scored attempts at ``problem`` in every run ``viewer`` may see, per run (newest run first).

    A public promptset is seen by everyone; the runs on it are not: only those Run.visible_to allows.
    """
    attempts = ProofAttempt.objects.visible_to(viewer).filter(
        Q(problem=problem) | Q(problem__isnull=True, problem_key=problem.problem_key,
                               run__promptset_version__promptset_id=problem.promptset_id)
    )
    return (
        attempts.values("run_id", "run__name", "run__state")
        .annotate(
            attempts=Count("id"),
            scored=Count("id", filter=Q(reward__isnull=False)),
            accepted=Count("id", filter=Q(reward__gte=1)),
            censored=Count("id", filter=Q(reward__isnull=True)),
            first_accepted_step=Min("step", filter=Q(reward__gte=1)),
            last_step=Max("step"),
        )
        .order_by("-run_id")
    )
