from __future__ import annotations

import difflib

from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render

from promptsets import benchmarks
from promptsets.lean_view import code_view
from proofs import groups, leaderboard
from proofs.models import ProofAttempt, RetryFeedback
from runs.models import StepMetrics


def code_diff(first: str, retry: str) -> list[tuple[str, str]]:
    """The retry's Lean code against the first attempt's, line by line: ('-'|'+'|' ', line)."""
    before, after = first.splitlines(), retry.splitlines()
    rows: list[tuple[str, str]] = []
    for tag, a_start, a_end, b_start, b_end in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag == "equal":
            rows.extend((" ", line) for line in before[a_start:a_end])
            continue
        rows.extend(("-", line) for line in before[a_start:a_end])
        rows.extend(("+", line) for line in after[b_start:b_end])
    return rows


# The token view's figures (frontend/src/_tokens.js colours by each) and the words for every figure of a token.
TOKEN_FIGURES = (
    ("learner_logprob", "log-probability (the learner's π_old)"),
    ("entropy", "entropy of the learner's distribution"),
    ("mismatch", "mismatch: π_old against the engine (full colour at a ratio of 2 or ½)"),
    ("loss", "clipped or masked"),
)
TOKEN_LABELS = {
    "learner_logprob": "log-probability, learner (π_old)", "engine_logprob": "log-probability, rollout engine",
    "mismatch": "mismatch, log(π_old / π_engine)", "entropy": "entropy (nats)", "loss_weight": "loss weight",
    "flags": "changed by",
    # What the page says where the API has no tokens (its ``state``), before the API's ``reason``.
    "pending": "Not written yet: the token records of this step are written after its learner step, in the background; "
    "this view draws them as soon as they are on disk.",
    "not_recorded": "Not recorded, and never will be:",
}


@login_required
def detail(request, pk):
    attempts = ProofAttempt.objects.visible_to(request.user).select_related("run", "parent")
    attempt = get_object_or_404(attempts, pk=pk)
    first_attempt = attempt.parent if attempt.turn == "retry" else None
    feedback = None
    if attempt.parent_rollout_key:
        feedback = RetryFeedback.objects.filter(run_id=attempt.run_id, parent_rollout_key=attempt.parent_rollout_key).first()
    views = {}
    # No code at all (a format failure before the lean4 block was found): no empty code box; the
    # page says so and shows the raw answer instead.
    if attempt.checked_code or attempt.lean_code:
        views["attempt"] = code_view(attempt.checked_code, attempt.lean_messages, attempt.lean_code)
    if first_attempt:
        views["first"] = code_view(first_attempt.checked_code, first_attempt.lean_messages, first_attempt.lean_code)
    rounds = _rounds(attempt)
    return render(request, "proofs/detail.html", {
        "attempt": attempt,
        "run": attempt.run,
        "first_attempt": first_attempt,
        "retries": list(attempt.retries.all()),
        "feedback": feedback,
        "diff": code_diff(first_attempt.lean_code, attempt.lean_code) if first_attempt else None,
        "code_is_unchanged": bool(first_attempt) and first_attempt.lean_code == attempt.lean_code,
        "code_views": views,
        "sampling": sorted(attempt.sampling.items()),
        "policy": _policy_facts(attempt),
        "rounds": rounds,
        "rounds_branch": any(round_["others"] for round_ in rounds),
        "token_figures": TOKEN_FIGURES,
        "token_labels": TOKEN_LABELS,
    })


@login_required
def group(request, pk):
    """One prompt's answers at one step, side by side (proofs/groups.py), sortable by ?sort=."""
    attempt = get_object_or_404(ProofAttempt.objects.visible_to(request.user).select_related("run"), pk=pk)
    sort = request.GET.get("sort", "sample")
    try:
        answers = groups.group_answers(attempt, sort)
    except groups.UnknownSort as error:
        return HttpResponseBadRequest(str(error))
    return render(request, "proofs/group.html", {
        "attempt": attempt, "run": attempt.run, "answers": answers, "sort": sort, "sorts": list(groups.SORTS),
        "has_advantages": any(answer.advantage is not None for answer in answers),
    })


def _rounds(attempt: ProofAttempt) -> list[dict]:
    """The attempt's trajectory (``ProofAttempt.trajectory``) as the page draws it: each round with its number (0:
    the first attempt), Lean's errors, and the diff of its Lean code from the round before. Empty when the attempt
    was never retried nor is a retry: a lone answer has no trajectory to draw."""
    chain = attempt.trajectory()
    if len(chain) < 2:
        return []
    rounds = []
    current_number = next(number for number, member in enumerate(chain) if member.pk == attempt.pk)
    for number, member in enumerate(chain):
        previous = chain[number - 1] if number else None
        # The chain is one branch of a tree: each answer's retry prompt is sampled several times. Up to this attempt
        # the branch is its own ancestry; after it, the earliest answer of each round. The page names the others.
        others = [retry for retry in previous.retries.order_by("pk") if retry.pk != member.pk] if previous else []
        errors = [message for message in member.lean_messages or []
                  if isinstance(message, dict) and message.get("severity") == "error"]
        rounds.append({
            "number": number, "attempt": member, "is_current": member.pk == attempt.pk, "errors": errors,
            "diff": code_diff(previous.lean_code, member.lean_code) if previous else None,
            "is_unchanged": previous is not None and previous.lean_code == member.lean_code,
            "others": others, "is_earliest_followed": number > current_number,
        })
    return rounds


def _policy_facts(attempt: ProofAttempt) -> dict | None:
    """Which policy wrote the rollout and, for a training rollout, which one trained on it (the step's
    ``rollout/policy_version`` metric): None when the trainer did not record the writer (older runs)."""
    if attempt.policy_version is None:
        return None
    trained_by = None
    if not attempt.is_evaluation:
        metrics = StepMetrics.objects.filter(run_id=attempt.run_id, step=attempt.step).values_list("values", flat=True).first()
        trained_by = (metrics or {}).get("rollout/policy_version")
        if not isinstance(trained_by, int) or isinstance(trained_by, bool):
            trained_by = None
    return {"written_by": attempt.policy_version, "trained_by": trained_by,
            "updates_behind": attempt.updates_behind(trained_by)}


@login_required
def benchmark_list(request):
    return render(request, "proofs/benchmarks.html", {
        "benchmarks": benchmarks.visible_benchmarks(request.user), "reference_label": benchmarks.REFERENCE_LABEL})


@login_required
def benchmark_page(request, pk):
    """The leaderboard of one benchmark (proofs/leaderboard.py), and what changed between two evaluations."""
    benchmark = get_object_or_404(benchmarks.visible_benchmarks(request.user), pk=pk)
    board = leaderboard.leaderboard(benchmark, request.user)
    with_samples = [row for row in board["rows"] if row.has_samples]
    before = request.GET.get("before") or (with_samples[0].key if len(with_samples) > 1 else "")
    after = request.GET.get("after") or (with_samples[1].key if len(with_samples) > 1 else "")
    return render(request, "proofs/benchmark.html", {
        "benchmark": benchmark, **board, "with_samples": with_samples,
        "matrix": [(problem, [(row, row.solved.get(problem.pk, ""), row.not_attempted.get(problem.problem_key, ""))
                              for row in with_samples])
                   for problem in board["problems"]],
        "difference": leaderboard.difference(board["rows"], before, after, board["problems"]),
        "before": before, "after": after,
    })
