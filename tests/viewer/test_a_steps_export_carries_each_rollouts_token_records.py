"""A step's export (JSON Lines and Parquet) carries each trained rollout's token records after verl's columns:
the advantage and, per token, the log-probabilities, entropy, loss weight and flags; null where none were
written (an evaluation sample, a censored answer), never zeros, with ``token_records_state`` saying why: recorded,
pending (the step's file is still being written) or not_recorded."""

import io
import json

import pytest

from trainer.observability import token_records

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(make_run, make_attempt):
    run = make_run(state="running", name="records run")
    make_attempt(run, step=2, rollout_key="a1-s2-p0-r0", reward=1.0, verdict="valid", lean_messages=[])
    make_attempt(run, step=2, rollout_key="a1-s2-p0-r1", reward=None, verdict="infra_error", is_censored=True)
    token_records.write_step_records(run.artifacts_dir, 2, 1, [token_records.TokenRecord(
        "a1-s2-p0-r0", 0.5, [7, 8], [-0.5, None], [-0.25, -2.0], [1.5, 0.25], [1.0, 0.0],
        [token_records.IS_CLIPPED_HIGH, token_records.IS_CONTEXT])], lambda ids: [f"<{i}>" for i in ids])
    return run


def body(client, run, query):
    response = client.get(f"/api/proofs/runs/{run.pk}/steps/2/rollouts/export?{query}")
    assert response.status_code == 200, response.content
    return b"".join(response.streaming_content) if response.streaming else response.getvalue()


def test_jsonl_rows_carry_the_token_records_and_null_where_there_are_none(exported, alice, logged_in):
    rows = [json.loads(line) for line in body(logged_in(alice), exported, "format=jsonl").decode().splitlines()]
    trained, censored = rows
    assert list(trained)[:5] == ["input", "output", "gts", "score", "step"]
    assert trained["advantage"] == 0.5 and trained["token_texts"] == ["<7>", "<8>"]
    assert trained["learner_logprob"] == [-0.25, -2.0] and trained["engine_logprob"] == [-0.5, None]
    assert trained["entropy"] == [1.5, 0.25] and trained["loss_weight"] == [1.0, 0.0]
    assert trained["flags"] == [token_records.IS_CLIPPED_HIGH, token_records.IS_CONTEXT]
    assert censored["advantage"] is None and censored["learner_logprob"] is None
    assert (trained["token_records_state"], censored["token_records_state"]) == ("recorded", "not_recorded")


def test_a_step_still_being_written_exports_its_rows_as_pending_then_recorded(make_run, make_attempt, alice, logged_in):
    run = make_run(state="running", name="writing run")
    make_attempt(run, step=2, rollout_key="a1-s2-p0-r0", reward=1.0, verdict="valid", lean_messages=[])
    make_attempt(run, step=2, rollout_key="a1-eval2-p0-r0", reward=1.0, verdict="valid", is_evaluation=True)
    client = logged_in(alice)

    def states():
        return [json.loads(line)["token_records_state"] for line in body(client, run, "format=jsonl").decode().splitlines()]

    marker = token_records.marker_path(run.artifacts_dir, 2, 1, token_records.PENDING)
    marker.parent.mkdir(parents=True)
    marker.touch()
    assert states() == ["pending", "not_recorded"]
    token_records.write_step_records(run.artifacts_dir, 2, 1, [token_records.TokenRecord(
        "a1-s2-p0-r0", 0.5, [7], [-0.5], [-0.5], [1.0], [1.0], [0])], lambda ids: [f"<{i}>" for i in ids])
    marker.unlink()
    assert states() == ["recorded", "not_recorded"]


def test_parquet_carries_them_as_typed_list_columns(exported, alice, logged_in):
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(body(logged_in(alice), exported, "format=parquet")))
    assert str(table.schema.field("entropy").type) == "list<element: halffloat>"
    assert str(table.schema.field("learner_logprob").type) == "list<element: float>"
    assert table.column("learner_logprob").to_pylist() == [[-0.25, -2.0], None]
    assert table.column("advantage").to_pylist() == [0.5, None]
