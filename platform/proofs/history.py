"""Every problem's history: what runs did with each formal statement, counted once, kept after the run.

The record (``ProblemHistory``) has one row per group: one run's answers to one statement at one step in one
round (0 the first attempt, 1, 2… the rounds of correction), for one purpose (training or evaluation), judged by
one verifier (real Lean or the stand-in). What it defends against:

- Counting an answer twice. The ingester may read an event again (a crash before its acknowledgement, a
  publisher's retry, a claimed entry), and the trainer may send a rollout again under a new event. Only the
  answers that became new ``ProofAttempt`` rows in this transaction are added (``record_new_attempts``), and
  ``(run, rollout_key)`` is unique, so each answer is added exactly once. Tested in
  tests/runs/test_a_problems_history_counts_each_answer_once_and_outlives_its_run.py.
- Losing it with the run. The rows hold counts, the run's id (no constraint), name and owner: deleting the run's
  artifacts, its rollouts or the run itself leaves its history.
- Pooling the stand-in with Lean. The stand-in decides a small fragment only; its verdicts are rows of their own
  (``is_standin``) and every rate reads one verifier (``verifier_of``: real Lean's wherever any exists). Each
  answer counts under its run's verifier, as its stored ``is_standin_verdict`` says: the ingester sets it for
  every answer, those that reached no verifier (format failures) included (proofs/run_rollouts.py).
- Zeros that were never measured. Censored answers (outages, the stand-in's "cannot decide") count as answers,
  never as scored; a rate with nothing scored is None, never 0. A Lean timeout is scored 0, as in the release.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection
from django.db.models import DateTimeField, IntegerField, Max, Min, OuterRef, Q, Subquery, Sum

from promptsets.models import Problem, statement_hash
from promptsets.results import LEAN, STANDIN, VERIFIED_BY
from proofs.models import ProblemHistory, ProofAttempt, Turn
from runs.models import Run


def correction_round(attempt: ProofAttempt) -> int:
    """Its round: rows stored before rounds were recorded say 0 for a retry too, and a retry is round 1 at least."""
    return attempt.round if attempt.turn == Turn.FIRST else max(1, attempt.round)


def record_new_attempts(attempts: Iterable[ProofAttempt]) -> None:
    """Add ``attempts`` to their problems' histories. Only attempts that were newly stored may be passed
    (the ingester passes those its batch inserted): that is what makes the counts idempotent.

    Inside the ingester's transaction, under its lock on the runs' rows; one INSERT … ON CONFLICT adds each
    group's counts to what is there (Django's upsert replaces, it cannot add)."""
    attempts = list(attempts)
    if not attempts:
        return
    runs = {run.pk: run for run in Run.objects.filter(pk__in={a.run_id for a in attempts})
            .only("pk", "name", "owner_id", "starting_checkpoint_id")}
    problem_hashes = dict(Problem.objects.filter(pk__in={a.problem_id for a in attempts if a.problem_id})
                          .values_list("pk", "statement_hash"))
    groups: dict[tuple, list[int | None]] = defaultdict(lambda: [0, 0, 0, None])
    for attempt in attempts:
        identity = statement_identity(attempt, problem_hashes)
        if identity is None:
            continue  # neither a statement nor a known problem: nothing names what it answered
        key = (identity, attempt.run_id, attempt.step, correction_round(attempt), attempt.is_evaluation,
               attempt.is_standin_verdict)
        counts = groups[key]
        counts[0] += 1
        counts[1] += attempt.reward is not None
        counts[2] += attempt.reward is not None and attempt.reward >= 1
        if attempt.policy_version is not None:
            counts[3] = max(counts[3] or 0, attempt.policy_version)
    rows = []
    for (identity, run_id, step, round_, is_evaluation, is_standin), (answers, scored, accepted, policy) in groups.items():
        run = runs[run_id]
        rows.append((identity, run_id, run.name, run.owner_id, run.starting_checkpoint_id, step, round_, is_evaluation,
                     is_standin, answers, scored, accepted, policy))
    if not rows:
        return  # every answer was skipped above; an INSERT with no VALUES is a syntax error that lost the batch
    table = ProblemHistory._meta.db_table
    # clock_timestamp(), not now(): groups recorded one after another in one transaction keep their order.
    row_values = "(" + ", ".join(["%s"] * 13) + ", clock_timestamp(), clock_timestamp())"
    placeholders = ", ".join([row_values] * len(rows))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {table} (statement_hash, run_id, run_name, run_owner_id, starting_checkpoint_id, step, round,
                    is_evaluation, is_standin, answers, scored, accepted, last_policy_version, first_recorded_at,
                    last_recorded_at)
                VALUES {placeholders}
                ON CONFLICT ON CONSTRAINT one_history_row_per_group DO UPDATE SET
                    answers = {table}.answers + EXCLUDED.answers,
                    scored = {table}.scored + EXCLUDED.scored,
                    accepted = {table}.accepted + EXCLUDED.accepted,
                    last_policy_version = GREATEST({table}.last_policy_version, EXCLUDED.last_policy_version),
                    run_name = EXCLUDED.run_name,
                    last_recorded_at = EXCLUDED.last_recorded_at""",
            [value for row in rows for value in row])


def statement_identity(attempt: ProofAttempt, problem_hashes: dict[int, str]) -> str | None:
    """The statement an answer answered: its problem's identity, else that of the statement the trainer sent."""
    if attempt.problem_id in problem_hashes:
        return problem_hashes[attempt.problem_id]
    if attempt.formal_statement.strip():
        return statement_hash(attempt.formal_statement)
    return None


# -- reading it ------------------------------------------------------------------------------------------------


def verifier_of(statement_hashes, viewer) -> str:
    """Whose verdicts the rates of these statements count: real Lean's wherever any of them has a scored Lean
    verdict; only where none has, the stand-in's (promptsets.results.VERIFIED_BY names both)."""
    visible = ProblemHistory.objects.visible_to(viewer).filter(statement_hash__in=statement_hashes, scored__gt=0)
    if visible.filter(is_standin=False).exists():
        return LEAN
    return STANDIN if visible.filter(is_standin=True).exists() else LEAN


def first_attempt_totals(statement_hashes: Iterable[str], viewer, verified_by: str) -> dict[str, tuple[int, int]]:
    """Statement → (accepted, scored) over the first attempts of the runs ``viewer`` may see, one verifier's."""
    rows = (ProblemHistory.objects.visible_to(viewer)
            .filter(statement_hash__in=list(statement_hashes), round=0, is_standin=verified_by == STANDIN)
            .values("statement_hash").annotate(accepted=Sum("accepted"), scored=Sum("scored")))
    return {row["statement_hash"]: (row["accepted"], row["scored"]) for row in rows}


def win_rates(problem_ids, *, viewer, verified_by: str = LEAN) -> dict[int, tuple[int, int]]:
    """Problem id → (accepted, scored) over the first attempts of the runs ``viewer`` may see; the same statement
    anywhere (another promptset, a benchmark) is the same problem.

    ``verified_by``: "lean" counts real Lean's verdicts only, "stand-in" the stand-in server's only, never both.
    First attempts only: a retry sees Lean's feedback, so its success says less about how hard the statement is."""
    if verified_by not in VERIFIED_BY:
        raise ValueError(f"verified_by must be one of {', '.join(VERIFIED_BY)}, got {verified_by!r}")
    hashes = dict(Problem.objects.filter(pk__in=list(problem_ids)).values_list("pk", "statement_hash"))
    totals = first_attempt_totals(set(hashes.values()), viewer, verified_by)
    return {pk: totals[identity] for pk, identity in hashes.items() if identity in totals}


@dataclass(frozen=True)
class PriorHistory:
    """What a run may start its prompt selection from (the export's three columns)."""

    attempts: int
    solves: int
    signal_less_streak: int


def prior_histories(statement_hashes: Iterable[str], viewer, verified_by: str,
                    excluding_run_id: int | None = None) -> dict[str, PriorHistory]:
    """Statement → its first attempts in the runs ``viewer`` may see (one verifier's), and how many of its newest
    groups gave no signal (all accepted or all rejected; a group is one run's one step, censored answers left out,
    groups with nothing scored skipped), counted back from the newest until one with signal."""
    rows = (ProblemHistory.objects.visible_to(viewer)
            .filter(statement_hash__in=list(statement_hashes), round=0, is_standin=verified_by == STANDIN, scored__gt=0)
            .exclude(run_id=excluding_run_id)
            .values("statement_hash", "run_id", "step")
            .annotate(accepted=Sum("accepted"), scored=Sum("scored"), recorded_at=Min("first_recorded_at"))
            .order_by("statement_hash", "-recorded_at", "-run_id", "-step"))
    histories: dict[str, list[int]] = {}
    is_counting: dict[str, bool] = {}
    for row in rows:
        identity = row["statement_hash"]
        history = histories.setdefault(identity, [0, 0, 0])
        history[0] += row["scored"]
        history[1] += row["accepted"]
        if is_counting.setdefault(identity, True):
            if row["accepted"] in (0, row["scored"]):
                history[2] += 1
            else:
                is_counting[identity] = False
    return {identity: PriorHistory(*counts) for identity, counts in histories.items()}


def runs_that_tried(statement_hash: str, viewer) -> list[dict]:
    """One row per run (and verifier) that answered the statement, newest run first: answers, scored, accepted and
    censored by round (first attempts, retries), first and last solved step, the policy it started from."""
    rows = (ProblemHistory.objects.visible_to(viewer).of_statement(statement_hash)
            .values("run_id", "is_standin")
            .annotate(run_name=Max("run_name"), starting_checkpoint_id=Max("starting_checkpoint_id"),
                      first_answers=Sum("answers", filter=Q(round=0)), first_scored=Sum("scored", filter=Q(round=0)),
                      first_accepted=Sum("accepted", filter=Q(round=0)),
                      retry_answers=Sum("answers", filter=Q(round__gt=0)),
                      retry_scored=Sum("scored", filter=Q(round__gt=0)),
                      retry_accepted=Sum("accepted", filter=Q(round__gt=0)),
                      first_solved_step=Min("step", filter=Q(accepted__gt=0)),
                      last_solved_step=Max("step", filter=Q(accepted__gt=0)), last_step=Max("step"),
                      last_policy_version=Max("last_policy_version"))
            .order_by("-run_id", "is_standin"))
    states = dict(Run.objects.filter(pk__in={row["run_id"] for row in rows}).values_list("pk", "state"))
    result = []
    for row in rows:
        row = {key: (value or 0) if key.endswith(("_answers", "_scored", "_accepted")) else value
               for key, value in row.items()}
        row["verified_by"] = STANDIN if row["is_standin"] else LEAN
        row["run_state"] = states.get(row["run_id"])  # None: the run was deleted; its history stays
        row["first_censored"] = row["first_answers"] - row["first_scored"]
        row["first_solve_rate"] = row["first_accepted"] / row["first_scored"] if row["first_scored"] else None
        result.append(row)
    return result


def solve_rate_series(statement_hash: str, viewer, verified_by: str) -> list[dict]:
    """The chart's data: per run, its first attempts' solve rate at each step (one verifier's; steps where nothing
    was scored are left out, not drawn as 0)."""
    rows = (ProblemHistory.objects.visible_to(viewer).of_statement(statement_hash)
            .filter(round=0, is_standin=verified_by == STANDIN, scored__gt=0)
            .values("run_id", "step").annotate(run_name=Max("run_name"), accepted=Sum("accepted"), scored=Sum("scored"))
            .order_by("run_id", "step"))
    series: dict[int, dict] = {}
    for row in rows:
        run = series.setdefault(row["run_id"], {"run_id": row["run_id"], "run_name": row["run_name"], "points": []})
        run["points"].append({"step": row["step"], "accepted": row["accepted"], "scored": row["scored"],
                              "solve_rate": row["accepted"] / row["scored"]})
    return list(series.values())


def verified_proofs(problem: Problem, viewer, limit: int = 50):
    """Accepted answers to the problem's statement, in any promptset, in the runs ``viewer`` may see, newest first.
    They are the runs' rows: a deleted run takes its proofs with it, while its counts stay in the history."""
    same_statement = Problem.objects.filter(statement_hash=problem.statement_hash).values("pk")
    return (ProofAttempt.objects.visible_to(viewer)
            .filter(Q(problem__in=same_statement) | Q(problem__isnull=True, problem_key=problem.problem_key,
                                                        run__promptset_version__promptset_id=problem.promptset_id),
                    reward__gte=1)
            .select_related("run").order_by("-pk")[:limit])


def attempt_history(problem: Problem, viewer):
    """promptsets.results' per-run history of ``problem``: the runs that tried its statement."""
    return runs_that_tried(problem.statement_hash, viewer)


def version_problem_counts(version, viewer):
    """The version's entries annotated with their statements' first-attempt history (one verifier's, returned
    beside them): ``history_attempts`` (scored), ``history_solves``, ``history_last_solved_at`` (None: never)."""
    hashes = version.entries.values_list("problem__statement_hash", flat=True)
    verified_by = verifier_of(hashes, viewer)
    groups = (ProblemHistory.objects.visible_to(viewer)
              .filter(statement_hash=OuterRef("problem__statement_hash"), round=0, is_standin=verified_by == STANDIN)
              .order_by().values("statement_hash"))
    entries = version.entries.select_related("problem").annotate(
        history_attempts=Subquery(groups.annotate(total=Sum("scored")).values("total"), output_field=IntegerField()),
        history_solves=Subquery(groups.annotate(total=Sum("accepted")).values("total"), output_field=IntegerField()),
        history_last_solved_at=Subquery(groups.filter(accepted__gt=0).annotate(last=Max("last_recorded_at"))
                                        .values("last"), output_field=DateTimeField()),
    )
    return entries, verified_by



def problem_history(problem: Problem, viewer) -> dict:
    """The problem page's and its API's one account of the statement's history, as ``viewer`` may see it: the
    first attempts' totals and solve rate per run and step (one verifier's, named), the runs that tried it, and
    its verified proofs."""
    verified_by = verifier_of([problem.statement_hash], viewer)
    accepted, scored = first_attempt_totals([problem.statement_hash], viewer, verified_by).get(
        problem.statement_hash, (0, 0))
    runs = runs_that_tried(problem.statement_hash, viewer)
    counted = [row for row in runs if row["verified_by"] == verified_by]
    solved_steps = [row for row in counted if row["first_solved_step"] is not None]
    return {
        "statement_hash": problem.statement_hash,
        "verified_by": verified_by,
        "first_attempts_scored": scored,
        "first_attempts_accepted": accepted,
        "solve_rate": accepted / scored if scored else None,
        "is_never_solved": bool(scored) and not accepted,
        "first_solved": min(solved_steps, key=lambda row: (row["run_id"], row["first_solved_step"]), default=None),
        "last_solved": max(solved_steps, key=lambda row: (row["run_id"], row["last_solved_step"]), default=None),
        "series": solve_rate_series(problem.statement_hash, viewer, verified_by),
        "runs": runs,
        "verified_proofs": [
            {"attempt_id": attempt.pk, "rollout_key": attempt.rollout_key, "run_id": attempt.run_id, "run_name": attempt.run.name, "step": attempt.step,
             "round": correction_round(attempt), "is_evaluation": attempt.is_evaluation,
             "verified_by": STANDIN if attempt.is_standin_verdict else LEAN, "url": attempt.get_absolute_url()}
            for attempt in verified_proofs(problem, viewer)],
    }
