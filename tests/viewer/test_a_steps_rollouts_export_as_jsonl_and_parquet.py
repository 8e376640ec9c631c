"""A step's rollouts download as JSON Lines or Parquet, verl's rollout-dump columns first, from the run page
and the API, narrowed by the list's filters; a censored rollout's score is empty, never 0."""

import io
import json

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def rollouts(make_run, make_attempt):
    run = make_run(state="running", name="export run")
    made = {
        "accepted": make_attempt(run, step=2, verdict="valid", reward=1.0, lean_messages=[], prompt="Prove it.",
                                 response="<think>omega</think>", formal_statement="theorem t : 1 = 1 := by"),
        "censored": make_attempt(run, step=2, verdict="infra_error", reward=None, is_censored=True,
                                 reasons=["the stand-in cannot decide this statement"]),
        "other_step": make_attempt(run, step=3, verdict="valid", reward=1.0),
    }
    return run, made


def download(client, run, step, query):
    response = client.get(f"/api/proofs/runs/{run.pk}/steps/{step}/rollouts/export?{query}")
    assert response.status_code == 200, response.content
    return response, b"".join(response.streaming_content) if response.streaming else response.getvalue()


def test_jsonl_has_verls_columns_first_and_one_row_per_rollout_of_the_step(rollouts, alice, logged_in):
    run, made = rollouts
    response, body = download(logged_in(alice), run, 2, "format=jsonl")
    assert response["Content-Disposition"] == 'attachment; filename="export run-step-2.jsonl"'
    rows = [json.loads(line) for line in body.decode().splitlines()]
    assert [row["rollout_key"] for row in rows] == [made["accepted"].rollout_key, made["censored"].rollout_key]
    assert list(rows[0])[:5] == ["input", "output", "gts", "score", "step"]
    assert (rows[0]["input"], rows[0]["output"], rows[0]["gts"], rows[0]["score"]) == (
        "Prove it.", "<think>omega</think>", "theorem t : 1 = 1 := by", 1.0)
    assert rows[1]["score"] is None and rows[1]["is_censored"] is True
    assert json.loads(rows[1]["reasons"]) == ["the stand-in cannot decide this statement"]


def test_parquet_holds_the_same_rows_with_typed_columns(rollouts, alice, logged_in):
    import pyarrow.parquet as pq

    run, made = rollouts
    _, body = download(logged_in(alice), run, 2, "verdict=valid&format=parquet")
    table = pq.read_table(io.BytesIO(body))
    assert table.column_names[:5] == ["input", "output", "gts", "score", "step"]
    assert table.column("rollout_key").to_pylist() == [made["accepted"].rollout_key]
    assert str(table.schema.field("score").type) == "double" and str(table.schema.field("step").type) == "int64"


@pytest.mark.parametrize(("query", "words"), [
    ("format=csv", "unknown export format 'csv'; choose one of jsonl, parquet"),
    ("verdict=maybe", "verdict"),
])
def test_an_export_with_a_bad_format_or_filter_says_what_to_fix(rollouts, alice, logged_in, query, words):
    run, _ = rollouts
    response = logged_in(alice).get(f"/api/proofs/runs/{run.pk}/steps/2/rollouts/export?{query}")
    assert response.status_code == 422 and words in response.json()["detail"]


def test_the_run_page_links_the_filtered_steps_exports(rollouts, alice, logged_in):
    run, _ = rollouts
    client = logged_in(alice)
    page = client.get(f"/runs/{run.pk}/?step=2&verdict=valid").content.decode()
    assert f"/api/proofs/runs/{run.pk}/steps/2/rollouts/export?verdict=valid&amp;format=parquet" in page
    assert "rollout-exports" not in client.get(f"/runs/{run.pk}/").content.decode()


def test_another_users_export_of_the_run_is_not_found(rollouts, bob, logged_in):
    run, _ = rollouts
    assert logged_in(bob).get(f"/api/proofs/runs/{run.pk}/steps/2/rollouts/export").status_code == 404
