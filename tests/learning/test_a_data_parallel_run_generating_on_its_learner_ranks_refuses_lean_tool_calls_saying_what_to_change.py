"""A run that generates on several learner ranks cannot pause an answer for Lean (``rollout.lean_tool_calls`` ≥ 1):
its ranks sample in lockstep. It is refused before anything is loaded, by the trainer at start-up and by the launch
form and the API, with one sentence that names the field and the three ways out. One GPU, and a rollout pool whose
processes ask Lean themselves, may ask Lean; K = 0 runs on any layout."""

import pytest
from django.urls import reverse

from runs.models import Run
from trainer.config import RunConfig
from trainer.ranks import RankPosition, check_launch_fits_config, check_world_fits_config, rank_rule_problems


def h100_config(**sections) -> RunConfig:
    return RunConfig.from_preset("h100x8", sections)


TWO_RANKS_WITH_K_2 = {"cluster": {"num_gpus": 2}, "rollout": {"lean_tool_calls": 2}}


def test_the_trainer_refuses_it_at_start_up_naming_the_field_and_what_to_set():
    with pytest.raises(ValueError) as refusal:
        check_launch_fits_config(h100_config(**TWO_RANKS_WITH_K_2), RankPosition(rank=0, world_size=2, local_rank=0))
    message = str(refusal.value)
    assert message.startswith("rollout.lean_tool_calls is 2, but this run generates on its 2 learner ranks")
    assert "set rollout.lean_tool_calls to 0" in message
    assert "cluster.num_gpus 1" in message and "cluster.rollout_gpus 1 or more" in message


def test_each_rank_refuses_it_before_the_run_is_built():
    # DataParallelRun.__init__ checks the world first; this is that check, for eight ranks of the preset.
    with pytest.raises(ValueError, match="cannot pause an answer for Lean"):
        check_world_fits_config(h100_config(rollout={"lean_tool_calls": 1}), 8)


def test_one_gpu_and_a_rollout_pool_may_ask_lean_and_k_0_runs_on_any_layout():
    one_gpu = h100_config(cluster={"num_gpus": 1}, rollout={"lean_tool_calls": 2})
    pooled = h100_config(cluster={"num_gpus": 4, "rollout_gpus": 1}, rollout={"lean_tool_calls": 2, "max_staleness": 1})
    assert rank_rule_problems(one_gpu, 1) == []
    assert rank_rule_problems(pooled, 3) == []
    assert rank_rule_problems(h100_config(), 8) == []


@pytest.mark.django_db
def test_the_api_and_the_form_refuse_it_on_the_lean_tool_calls_field(alices_client, promptset_version, dispatched):
    expected = rank_rule_problems(h100_config(rollout={"lean_tool_calls": 1}), 8)
    assert [field for field, _ in expected] == ["rollout.lean_tool_calls"]
    response = alices_client.post("/api/runs/", {"name": "tools on 8", "promptset_version_id": promptset_version.pk,
                                                 "preset": "h100x8", "lean_tool_calls": 1},
                                  content_type="application/json")
    assert response.status_code == 422
    assert response.json()["field_errors"] == {"lean_tool_calls": [f"ranks: {expected[0][1]}"]}
    form = alices_client.post(reverse("runs:new"), {"name": "tools on 8", "promptset_version": promptset_version.pk,
                                                    "preset": "h100x8", "kind": "rl", "lean_tool_calls": 1})
    assert form.status_code == 200
    assert form.context["form"].errors["lean_tool_calls"] == [f"ranks: {expected[0][1]}"]
    assert Run.objects.count() == 0 and dispatched == []
