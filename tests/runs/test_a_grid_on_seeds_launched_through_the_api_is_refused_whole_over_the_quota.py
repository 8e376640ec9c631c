"""A 2 × 2 grid on two seeds (8 runs) launched through the API: refused whole, saying why, when it exceeds the owner's
concurrent-run limit; accepted when it fits, as eight ordinary runs of one group, each cell on both seeds."""

import pytest

from runs.models import Quota, Run, RunGroup, RunState
from trainer.config import RunConfig

pytestmark = pytest.mark.django_db

GRID = {"learning_rate": [1e-5, 2e-5], "temperature": [0.7, 1.0]}


@pytest.fixture
def launch_group(alices_client, promptset_version, django_capture_on_commit_callbacks):
    def launch(**fields):
        body = {"name": "lr × temperature", "promptset_version_id": promptset_version.pk, "preset": "cpu-smoke",
                "seeds": 2, "grid": GRID, **fields}
        with django_capture_on_commit_callbacks(execute=True):
            return alices_client.post("/api/runs/groups/", body, content_type="application/json")

    return launch


def test_a_grid_of_eight_runs_is_refused_whole_over_a_limit_of_four_concurrent_runs(alice, launch_group, dispatched):
    Quota.objects.create(user=alice, max_concurrent_runs=4, max_gpus=0)
    response = launch_group()
    assert response.status_code == 422
    assert response.json()["field_errors"]["seeds"] == [
        "the launch would start 8 runs, more than alice's limit of 4 concurrent runs: use fewer seeds or a smaller "
        "grid, or ask an administrator to raise the limit"]
    assert not Run.objects.exists() and not RunGroup.objects.exists()


def test_a_grid_of_eight_runs_that_fits_starts_each_cell_on_both_seeds(alice, launch_group, dispatched):
    Quota.objects.create(user=alice, max_concurrent_runs=8, max_gpus=0)
    response = launch_group()
    assert response.status_code == 201, response.json()
    group = RunGroup.objects.get(pk=response.json()["id"])
    runs = list(group.runs.order_by("pk"))
    assert len(runs) == 8 and all(run.state == RunState.QUEUED for run in runs)
    first_seed = RunConfig.from_preset("cpu-smoke").schedule.seed
    launched = sorted((run.resolved_config.optimizer.learning_rate, run.resolved_config.rollout.temperature,
                       run.resolved_config.schedule.seed) for run in runs)
    assert launched == sorted((lr, temperature, seed) for lr in GRID["learning_rate"]
                              for temperature in GRID["temperature"] for seed in (first_seed, first_seed + 1))
    # Each is an ordinary run: the scheduler admitted all eight within alice's limit.
    assert sorted(dispatched) == [run.pk for run in runs]
    assert {member["cell"]["learning_rate"] for member in response.json()["runs"]} == {1e-5, 2e-5}


def test_a_grid_over_four_fields_or_over_the_seed_is_refused_naming_the_fix(launch_group):
    response = launch_group(grid={**GRID, "eval_samples": [1, 2], "prompts_per_step": [1, 2]})
    assert response.status_code == 422
    assert "varies 4 fields (learning_rate, temperature, eval_samples, prompts_per_step); at most 3" in \
        response.json()["field_errors"]["grid"]
    response = launch_group(grid={"seed": [1, 2]})
    assert response.json()["field_errors"]["grid"] == [
        "varies seed: the seeds come from `seeds` (the number of runs of each cell), not the grid"]


def test_a_cell_out_of_the_presets_bounds_refuses_the_group_naming_the_cell(alice, launch_group):
    Quota.objects.create(user=alice, max_concurrent_runs=8, max_gpus=0)
    response = launch_group(grid={"learning_rate": [1e-5, 0.5]}, seeds=2)
    assert response.status_code == 422
    assert response.json()["field_errors"]["grid"] == [
        "learning_rate=0.5: must be from 1e-8 to 0.01 for the cpu-smoke preset (got 0.5)"]
    assert not Run.objects.exists()


def test_cancel_all_ends_every_run_and_another_seed_adds_one_run_per_cell(alice, launch_group, alices_client,
                                                                           dispatched, monkeypatch):
    monkeypatch.setattr("runs.ray_jobs.stop", lambda job_id: False)  # nothing reached Ray: no job to stop
    Quota.objects.create(user=alice, max_concurrent_runs=12, max_gpus=0)
    group_id = launch_group().json()["id"]
    response = alices_client.post(f"/api/runs/groups/{group_id}/seeds")
    assert response.status_code == 201
    seeds = sorted(member["seed"] for member in response.json()["runs"])
    first_seed = RunConfig.from_preset("cpu-smoke").schedule.seed
    assert seeds == [first_seed] * 4 + [first_seed + 1] * 4 + [first_seed + 2] * 4
    response = alices_client.post(f"/api/runs/groups/{group_id}/cancel")
    assert {member["state"] for member in response.json()["runs"]} == {"cancelled"}


def test_a_stranger_neither_sees_nor_cancels_a_group(alice, charlie, launch_group, client):
    Quota.objects.create(user=alice, max_concurrent_runs=8, max_gpus=0)
    group_id = launch_group().json()["id"]
    client.force_login(charlie)
    assert client.get(f"/api/runs/groups/{group_id}").status_code == 404
    assert client.post(f"/api/runs/groups/{group_id}/cancel").status_code == 404


def test_each_runs_page_links_to_its_group_and_the_group_page_lists_every_cell(alice, launch_group, alices_client,
                                                                              dispatched):
    Quota.objects.create(user=alice, max_concurrent_runs=8, max_gpus=0)
    group = RunGroup.objects.get(pk=launch_group().json()["id"])
    run = group.runs.first()
    assert f'<a href="/runs/groups/{group.pk}/">lr × temperature</a>' in alices_client.get(f"/runs/{run.pk}/").content.decode()
    page = alices_client.get(f"/runs/groups/{group.pk}/").content.decode()
    assert page.count('<section class="group-cell"') == 4 and page.count("<tr data-run-id=") == 8
    assert "learning_rate=1e-5, temperature=0.7" in page
