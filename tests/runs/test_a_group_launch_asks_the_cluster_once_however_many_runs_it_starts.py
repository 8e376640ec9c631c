"""A launch checks the run's layout against the cluster's nodes (runs/actions.py check_resolved_config). A group
launch asks the cluster once for all its runs: against a Ray head that never answers, eight runs wait for one
timeout, not eight, and are stored (a cluster that does not answer refuses nothing at launch)."""

import pytest

from runs.models import Quota, RunGroup, RunState

pytestmark = pytest.mark.django_db


def launch_body(promptset_version):
    return {"name": "lr × temperature", "promptset_version_id": promptset_version.pk, "preset": "cpu-smoke",
            "seeds": 2, "grid": {"learning_rate": [1e-5, 2e-5], "temperature": [0.7, 1.0]}}


def test_eight_runs_of_a_group_ask_a_silent_cluster_once_and_are_stored(
        alice, alices_client, promptset_version, silent_ray_head):
    Quota.objects.create(user=alice, max_concurrent_runs=12, max_gpus=0)
    response = alices_client.post("/api/runs/groups/", launch_body(promptset_version), content_type="application/json")
    assert response.status_code == 201, response.json()
    group = RunGroup.objects.get(pk=response.json()["id"])
    assert group.runs.count() == 8 and set(group.runs.values_list("state", flat=True)) == {RunState.QUEUED}
    assert len(silent_ray_head.accepted) == 1


def test_another_seed_for_every_cell_asks_the_cluster_once(alice, alices_client, promptset_version, silent_ray_head):
    Quota.objects.create(user=alice, max_concurrent_runs=12, max_gpus=0)
    group_id = alices_client.post("/api/runs/groups/", launch_body(promptset_version),
                                  content_type="application/json").json()["id"]
    asked_at_launch = len(silent_ray_head.accepted)
    response = alices_client.post(f"/api/runs/groups/{group_id}/seeds")
    assert response.status_code == 201
    assert RunGroup.objects.get(pk=group_id).runs.count() == 12  # one more run of each of the four cells
    assert len(silent_ray_head.accepted) == asked_at_launch + 1
