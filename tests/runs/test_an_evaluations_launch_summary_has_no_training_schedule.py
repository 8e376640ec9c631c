"""An evaluation run trains nothing, so its launch summary lists no training steps, learning rate or checkpoints,
and says what it samples instead (issue 45: the summary of kind eval listed training steps and learning rate)."""

import pytest

pytestmark = pytest.mark.django_db

TRAINING_ROWS = {"Training steps", "Passes over the promptset", "Learning rate", "Evaluate every", "Checkpoint every",
                 "Prompts per step", "Answers per prompt", "Proofs sent to Lean per step", "Step time"}


def labels(client, **fields) -> dict[str, str]:
    response = client.get("/api/runs/launch-summary", fields)
    assert response.status_code == 200, response.content
    return {row["label"]: row["value"] for row in response.json()["summary"]}


def test_an_evaluations_summary_says_what_it_samples_and_nothing_of_training(alices_client):
    rows = labels(alices_client, preset="cpu-smoke", kind="eval", eval_samples=3, error_correction="false")
    assert TRAINING_ROWS.isdisjoint(rows), sorted(TRAINING_ROWS & set(rows))
    assert rows["Samples per problem"] == "3" and rows["Error correction"] == "off"
    assert "Model" in rows and "Memory plan" in rows


def test_a_training_runs_summary_keeps_its_schedule(alices_client):
    rows = labels(alices_client, preset="cpu-smoke", kind="rl")
    assert TRAINING_ROWS <= set(rows)
