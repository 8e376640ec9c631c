"""The exported promptset (a download, and the file a run's trainer reads at launch) carries each problem's
history on the platform in three nullable columns: prior_attempts, prior_solves, prior_signal_less_streak,
counting real Lean's verdicts unless only the stand-in judged, in the runs the exporting person may see; and
the export still uploads again as the same problems."""

import io
import json

import pyarrow.parquet as pq
import pytest

from promptsets.intake import FileCheck
from promptsets.models import Problem
from promptsets.versions import import_promptset
from proofs.models import Turn
from runs.actions import export_run_inputs
from tests.stored_attempts import stored_attempt
from trainer.recipe.problems import load_problems_jsonl

pytestmark = pytest.mark.django_db

# The contract with the trainer's data.selection=history, written out: the names are fixed.
PRIOR_HISTORY_COLUMNS = ("prior_attempts", "prior_solves", "prior_signal_less_streak")
NO_HISTORY = dict.fromkeys(PRIOR_HISTORY_COLUMNS)


def answers(run, key, step, rewards, *, standin=False, turn=Turn.FIRST):
    """One group: ``run``'s answers to ``key`` at ``step`` (None: censored)."""
    problem = Problem.objects.get(problem_key=key)
    for sample, reward in enumerate(rewards):
        stored_attempt(run=run, rollout_key=f"s{step}-{key}-{turn}-r{sample}", step=step, problem=problem,
                       problem_key=key, turn=turn, round=0 if turn == Turn.FIRST else 1, reward=reward,
                       is_censored=reward is None, is_standin_verdict=standin)


def downloaded(client, person, version, file_format="jsonl") -> list[dict]:
    client.force_login(person)
    response = client.get(f"/api/promptsets/{version.promptset_id}/versions/{version.number}/export.{file_format}")
    assert response.status_code == 200
    data = b"".join(response.streaming_content) if response.streaming else response.content
    if file_format == "parquet":
        return pq.read_table(io.BytesIO(data)).to_pylist()
    return [json.loads(line) for line in data.decode().splitlines()]


def prior(rows, key) -> dict:
    (row,) = [row for row in rows if row["problem_id"] == key]
    return {column: row[column] for column in PRIOR_HISTORY_COLUMNS}


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
def test_each_row_counts_the_first_attempts_and_the_newest_groups_without_signal(client, alice, make_run,
                                                                                 promptset_version, file_format):
    older, newer = make_run(state="succeeded", name="older"), make_run(state="succeeded", name="newer")
    answers(older, "add_small", 1, [1.0, 0.0, None])  # signal; the censored answer is no score
    answers(older, "add_small", 2, [1.0, 1.0])  # all accepted: no signal
    answers(newer, "add_small", 1, [0.0, 0.0])  # all rejected: no signal
    answers(newer, "add_small", 2, [1.0], turn=Turn.RETRY)  # a retry: not a first attempt
    answers(newer, "lt_small", 1, [None, None])  # censored only: nothing scored, no history
    rows = downloaded(client, alice, promptset_version, file_format)
    assert prior(rows, "add_small") == {"prior_attempts": 6, "prior_solves": 3, "prior_signal_less_streak": 2}
    assert prior(rows, "mul_small") == NO_HISTORY
    assert prior(rows, "lt_small") == NO_HISTORY


def test_the_standins_verdicts_count_only_where_no_problem_has_lean_s(client, alice, make_run, promptset_version):
    run = make_run(state="succeeded")
    answers(run, "mul_small", 1, [1.0, 1.0], standin=True)
    assert prior(downloaded(client, alice, promptset_version), "mul_small") == {
        "prior_attempts": 2, "prior_solves": 2, "prior_signal_less_streak": 1}
    answers(run, "add_small", 1, [0.0], standin=False)  # now Lean has spoken: the stand-in's are not mixed in
    rows = downloaded(client, alice, promptset_version)
    assert prior(rows, "mul_small") == NO_HISTORY
    assert prior(rows, "add_small") == {"prior_attempts": 1, "prior_solves": 0, "prior_signal_less_streak": 1}


def test_only_the_runs_the_exporting_person_may_see_count(client, alice, charlie, make_run, promptset_version):
    promptset_version.promptset.is_public = True
    promptset_version.promptset.save()
    answers(make_run(state="succeeded"), "add_small", 1, [1.0, 0.0])
    assert prior(downloaded(client, alice, promptset_version), "add_small")["prior_attempts"] == 2
    assert prior(downloaded(client, charlie, promptset_version), "add_small") == NO_HISTORY


def test_a_runs_own_file_carries_its_owners_earlier_runs_and_the_trainer_reads_it(alice, make_run,
                                                                                 promptset_version):
    answers(make_run(state="succeeded", name="earlier"), "add_small", 1, [1.0, 0.0])
    launched = make_run(state="queued", name="launched")
    answers(launched, "add_small", 1, [1.0])  # its own answers (a resumed run's): not prior to itself
    export_run_inputs(launched)
    rows = [json.loads(line) for line in (launched.artifacts_dir / "promptset.jsonl").read_text().splitlines()]
    assert prior(rows, "add_small") == {"prior_attempts": 2, "prior_solves": 1, "prior_signal_less_streak": 0}
    assert prior(rows, "lt_small") == NO_HISTORY
    assert [p.problem_id for p in load_problems_jsonl(launched.artifacts_dir / "promptset.jsonl")] == [
        "add_small", "mul_small", "lt_small"]


def test_an_export_with_history_uploads_again_as_the_same_problems(client, alice, make_run, promptset_version):
    answers(make_run(state="succeeded"), "add_small", 1, [1.0, 0.0])
    client.force_login(alice)
    response = client.get(f"/api/promptsets/{promptset_version.promptset_id}/versions/1/export.jsonl")
    data = b"".join(response.streaming_content)
    assert b'"prior_attempts": 2' in data
    again = import_promptset(alice, "arith again", FileCheck(io.BytesIO(data), filename="arith-v1.jsonl"))
    original = {(p.problem_key, p.formal_statement) for p in promptset_version.problems.all()}
    assert {(p.problem_key, p.formal_statement) for p in again.version.problems.all()} == original
