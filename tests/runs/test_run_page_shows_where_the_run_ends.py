"""The run page's "step N of M" and the runs list's "N / M": M is where the trainer will stop, epochs or steps."""

import pytest

from trainer.config import RunConfig

pytestmark = pytest.mark.django_db


def test_an_epoch_based_run_ends_after_its_epochs_over_the_promptset(make_run):
    # Three problems, one prompt a step: 3 steps an epoch, the release's 15 epochs.
    config = RunConfig.from_preset("cpu-demo", {"schedule": {"total_epochs": 15, "total_steps": None},
                                                "rollout": {"prompts_per_step": 1},
                                                "optimizer": {"mini_batch_prompts": 1}})
    assert make_run(config=config.to_json_dict()).planned_steps == 45


def test_with_epochs_and_steps_the_run_ends_at_whichever_comes_first(make_run):
    config = RunConfig.from_preset("cpu-demo", {"schedule": {"total_epochs": 15, "total_steps": 10},
                                                "rollout": {"prompts_per_step": 1},
                                                "optimizer": {"mini_batch_prompts": 1}})
    assert make_run(config=config.to_json_dict()).planned_steps == 10


def test_a_step_based_run_ends_at_its_steps(make_run):
    assert make_run().planned_steps == 20  # cpu-demo


def test_the_run_page_and_the_runs_list_say_step_n_of_m(client, alice, make_run):
    config = RunConfig.from_preset("cpu-demo", {"schedule": {"total_epochs": 2, "total_steps": None},
                                                "rollout": {"prompts_per_step": 1},
                                                "optimizer": {"mini_batch_prompts": 1}})
    run = make_run(state="running", config=config.to_json_dict(), current_step=4)
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'step <span id="run-step">4</span><span id="run-total-steps"> of 6</span>' in page
    summaries = client.get("/api/runs/summaries").json()
    assert [(row["step"], row["total_steps"]) for row in summaries] == [(4, 6)]


def test_a_run_saved_before_epochs_existed_still_ends_at_its_steps(make_run):
    config = RunConfig.from_preset("cpu-demo").to_json_dict()
    del config["schedule"]["total_epochs"]
    assert make_run(config=config).planned_steps == 20


def test_a_warm_start_run_shows_no_planned_rl_steps(make_run):
    assert make_run(kind="sft").planned_steps is None
