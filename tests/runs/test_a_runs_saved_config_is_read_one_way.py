"""A run's saved config is read one way (Run.resolved_config, the trainer's own RunConfig.from_saved) by
dispatch, the entry point, the page and the API, and shown one way (RunConfig.to_public_dict)."""

import pytest

from trainer.config import RunConfig

pytestmark = pytest.mark.django_db


def saved_before_epochs_existed(total_steps: int) -> dict:
    config = RunConfig.from_preset("cpu-demo", {"schedule": {"total_steps": total_steps}}).to_json_dict()
    del config["schedule"]["total_epochs"]
    return config


def test_a_config_saved_before_epochs_existed_is_shown_as_the_trainer_reads_it(make_run, settings):
    settings.LEAN_SERVER_URL = "http://lean.internal:12332"
    run = make_run(state="running", config=saved_before_epochs_existed(4))
    assert run.resolved_config.schedule.total_epochs is None  # it trained by total_steps alone
    shown = run.public_config
    assert shown == run.resolved_config.to_public_dict()
    assert shown["schedule"]["total_epochs"] is None and shown["schedule"]["total_steps"] == 4
    assert run.planned_steps == 4


def test_the_api_shows_the_public_config_without_the_lean_servers_address(alices_client, make_run):
    config = RunConfig.from_preset("cpu-demo").to_json_dict()
    config["verifier"]["url"] = "http://lean.internal:12332"
    run = make_run(config=config)
    shown = alices_client.get(f"/api/runs/{run.pk}").json()["config"]
    assert shown == run.resolved_config.to_public_dict() and "url" not in shown["verifier"]


def test_a_config_the_trainer_no_longer_reads_is_still_shown_without_the_lean_servers_address(make_run):
    config = RunConfig.from_preset("cpu-demo").to_json_dict()
    config["rollout"]["a_setting_since_removed"] = 3
    config["verifier"]["url"] = "http://lean.internal:12332"
    run = make_run(config=config)
    assert run.planned_steps is None
    assert run.public_config["rollout"]["a_setting_since_removed"] == 3 and "url" not in run.public_config["verifier"]
