"""Before a launch, the form's summary (GET /api/runs/launch-summary, asked with the form's own fields) says how many
runs a group launch will start and names each by its cell and seed; a single run's summary, which the form asks
with its seeds box at 1, is still a single run's."""

import pytest

from trainer.config import RunConfig

pytestmark = pytest.mark.django_db

FIRST_SEED = RunConfig.from_preset("cpu-smoke").schedule.seed


def summary(client, **fields):
    return client.get("/api/runs/launch-summary", {"preset": "cpu-smoke", "name": "lr", **fields})


def test_a_single_runs_summary_asked_with_one_seed_is_a_single_runs(alices_client):
    response = summary(alices_client, seeds="1", grid="")
    assert response.status_code == 200, response.json()
    assert response.json()["runs"] is None


def test_three_seeds_are_three_runs_named_by_their_seeds(alices_client):
    plan = summary(alices_client, seeds="3").json()["runs"]
    assert plan["count"] == 3
    assert plan["text"].startswith("This launch starts 3 runs (1 cell × 3 seeds)")
    assert plan["members"] == [f"lr · seed {seed}" for seed in range(FIRST_SEED, FIRST_SEED + 3)]


def test_a_grid_written_as_the_forms_box_holds_it_is_every_cell_on_every_seed(alices_client):
    plan = summary(alices_client, seeds="2", grid="learning_rate=1e-5, 2e-5\ntemperature=0.7,1.0").json()["runs"]
    assert plan["count"] == 8
    assert plan["members"][:2] == [f"lr · learning_rate=1e-5, temperature=0.7 · seed {FIRST_SEED}",
                                   f"lr · learning_rate=1e-5, temperature=0.7 · seed {FIRST_SEED + 1}"]


def test_a_grid_line_that_is_not_field_equals_values_is_refused_on_the_grid(alices_client):
    response = summary(alices_client, grid="learning_rate 1e-5")
    assert response.status_code == 422
    assert response.json()["field_errors"]["grid"] == [
        "expected FIELD=VALUE, got 'learning_rate 1e-5'; e.g. learning_rate=1e-5, 2e-5"]
