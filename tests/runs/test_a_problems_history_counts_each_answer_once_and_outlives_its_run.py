"""A problem's history (proofs.models.ProblemHistory) is filled by the ingester as rollouts arrive: each answer
counts once whatever the deliveries, the stand-in's verdicts are kept apart from Lean's, and the history stays
when the run's artifacts, rollouts and the run itself are deleted."""

import shutil

import pytest

from promptsets import results
from promptsets.models import Problem, Promptset, PromptsetVersion, VersionProblem, statement_hash
from proofs.models import ProblemHistory, ProofAttempt
from runs.ingest import EventIngester
from runs.models import Run
from tests.runs.event_helpers import publisher_for, rollout
from trainer.observability.events import EventType, stream_key

pytestmark = pytest.mark.django_db(transaction=True)

ADD_SMALL = "theorem add_small : (2 : ℕ) + 3 = 5 := by"


def history_of_add_small():
    return list(ProblemHistory.objects.filter(statement_hash=statement_hash(ADD_SMALL))
                .order_by("step", "round", "is_standin")
                .values_list("step", "round", "is_standin", "answers", "scored", "accepted"))


def test_an_event_delivered_twice_counts_its_answer_once(running_run, redis_client):
    event = publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r0"))
    redis_client.xadd(stream_key(str(running_run.pk)), event.to_stream_fields())  # a publisher's retry
    ingester = EventIngester()
    ingester.poll_once()
    ingester.poll_once()
    assert history_of_add_small() == [(1, 0, True, 1, 1, 1)]


def test_a_rollout_sent_again_under_a_new_event_counts_once(running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r0"))
    EventIngester().poll_once()
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r0"))  # same answer, new event id
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r1", verdict="lean_error", reward=0.0))
    EventIngester().poll_once()
    assert ProofAttempt.objects.filter(run=running_run).count() == 2
    assert history_of_add_small() == [(1, 0, True, 2, 2, 1)]


def test_answers_are_counted_by_round_and_verifier_and_a_censored_one_is_never_scored(running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r0", verdict="lean_error", reward=0.0,
                                                          is_standin_verdict=False))
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r1", verdict="infra_error", reward=None,
                                                          is_censored=True, is_standin_verdict=False))
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r2"))  # the stand-in's acceptance
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=2, key="s2-retry-0", turn="retry", round=1,
                                                          parent_rollout_key="s1-p0-r0", is_standin_verdict=False))
    EventIngester().poll_once()
    assert history_of_add_small() == [
        (1, 0, False, 2, 1, 0),  # Lean's: one rejected, one censored (an answer, not a score)
        (1, 0, True, 1, 1, 1),  # the stand-in's, a row of its own
        (2, 1, False, 1, 1, 1),  # the retry, round 1
    ]
    problem = Problem.objects.get(problem_key="add_small")
    viewer = running_run.owner
    assert results.win_rates([problem.pk], viewer=viewer, verified_by=results.LEAN) == {problem.pk: (0, 1)}
    assert results.win_rates([problem.pk], viewer=viewer, verified_by=results.STANDIN) == {problem.pk: (1, 1)}


def test_the_history_outlives_the_runs_artifacts_rollouts_and_the_run_itself(running_run, redis_client, alice,
                                                                              charlie):
    publisher = publisher_for(running_run)
    for sample in range(3):
        publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key=f"s1-p0-r{sample}", reward=float(sample == 0),
                                                              verdict="valid" if sample == 0 else "lean_error"))
    EventIngester().poll_once()
    problem = Problem.objects.get(problem_key="add_small")
    before = results.win_rates([problem.pk], viewer=alice, verified_by=results.STANDIN)

    running_run.artifacts_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(running_run.artifacts_dir)
    ProofAttempt.objects.filter(run=running_run).delete()
    run_id = running_run.pk
    Run.objects.filter(pk=run_id).delete()

    assert before == {problem.pk: (1, 3)}
    assert results.win_rates([problem.pk], viewer=alice, verified_by=results.STANDIN) == before
    (row,) = ProblemHistory.objects.filter(run_id=run_id)
    assert (row.run_name, row.run_owner_id, row.answers) == ("a run", alice.pk, 3)
    # A deleted run is shared with nobody: its history is its owner's alone.
    assert results.win_rates([problem.pk], viewer=charlie, verified_by=results.STANDIN) == {}


def test_the_same_statement_in_another_promptset_is_the_same_problem(running_run, redis_client, alice):
    publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r0"))
    EventIngester().poll_once()
    elsewhere = Promptset.objects.create(owner=alice, name="benchmark copy")
    version = PromptsetVersion.objects.create(promptset=elsewhere, number=1, problem_count=1)
    # The same statement laid out differently: one identity regardless of whitespace.
    copy = Problem.objects.create(promptset=elsewhere, problem_key="other-id", formal_statement=ADD_SMALL.replace(" ", "  "),
                                  statement_hash=statement_hash(ADD_SMALL.replace(" ", "  ")))
    VersionProblem.objects.create(version=version, problem=copy, position=0)
    assert results.win_rates([copy.pk], viewer=alice, verified_by=results.STANDIN) == {copy.pk: (1, 1)}


def format_failure(key, step=1, **fields):
    """An answer that failed the format check: the model's 0, never sent to any verifier (no verdict, no label)."""
    return rollout(step=step, key=key, verdict=None, reward=0.0, is_standin_verdict=False, lean_code="",
                   format_error="no lean4 code block", **fields)


@pytest.mark.parametrize("verified_by, platforms_server_is_standin, is_standin", [
    ("stand-in", False, True), ("lean", True, False)])
def test_a_format_failure_counts_with_the_verifier_its_trainer_names_whatever_the_platforms_server(
        running_run, redis_client, settings, verified_by, platforms_server_is_standin, is_standin):
    settings.LEAN_SERVER_IS_STANDIN = platforms_server_is_standin
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, format_failure("s1-p0-r0", verified_by=verified_by))
    EventIngester().poll_once()
    assert ProofAttempt.objects.get(run=running_run).is_standin_verdict is is_standin
    assert history_of_add_small() == [(1, 0, is_standin, 1, 1, 0)]


def test_an_integrity_rejection_which_no_verifier_saw_counts_with_the_verifier_its_trainer_names(running_run,
                                                                                                  redis_client):
    publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, rollout(
        key="s1-p0-r0", verdict="rejected", reward=0.0, is_standin_verdict=False, verified_by="stand-in",
        reasons=["the proof uses a forbidden construct"]))
    EventIngester().poll_once()
    assert history_of_add_small() == [(1, 0, True, 1, 1, 0)]


# Events from a trainer older than ``verified_by`` (or a test's injected scorer) name no verifier: the platform
# infers a format failure's from its run's other answers, else from its own Lean server.

def test_a_format_failure_from_an_older_trainer_counts_with_its_runs_verifier_never_as_a_lean_verdict_of_a_standin_run(
        running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, format_failure("s1-p0-r0"))
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r1"))  # the stand-in's acceptance
    EventIngester().poll_once()
    publisher.publish(EventType.ROLLOUT_FINISHED, format_failure("s2-p0-r0", step=2))  # alone in its batch
    EventIngester().poll_once()

    assert history_of_add_small() == [(1, 0, True, 2, 2, 1), (2, 0, True, 1, 1, 0)]
    problem = Problem.objects.get(problem_key="add_small")
    assert results.verifier_of([problem.statement_hash], running_run.owner) == results.STANDIN
    assert results.win_rates([problem.pk], viewer=running_run.owner, verified_by=results.STANDIN) == {problem.pk: (1, 3)}


def test_a_run_whose_answers_from_an_older_trainer_have_all_failed_the_format_so_far_counts_them_with_the_platforms_lean_server(
        running_run, redis_client, settings):
    settings.LEAN_SERVER_IS_STANDIN = False
    publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, format_failure("s1-p0-r0"))
    EventIngester().poll_once()
    assert history_of_add_small() == [(1, 0, False, 1, 1, 0)]
