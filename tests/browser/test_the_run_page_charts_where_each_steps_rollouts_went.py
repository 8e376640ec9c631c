"""The run page charts, step by step, the shares of a step's groups that taught the learner, that all failed, that
all passed and that had no scored answer (issue 47), as the API's series gives them. The metrics travel the real
path: the run's Redis Stream, the platform's ingester, the API and the WebSocket, with no trainer
(tests/browser/trainer_events.py); their values are the trainer's own computation on hand-made groups."""

import math
import time

import pytest
import torch

from runs.models import RunState
from tests.browser.conftest import log_in
from tests.browser.trainer_events import publish, wait_for_state, wait_until
from trainer.learning.group_signal import LABELS, group_signal_metrics
from trainer.observability.events import EventType

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NaN = math.nan
SHARES = ("batch/groups_with_signal", "batch/groups_all_fail", "batch/groups_all_pass", "batch/groups_unscored")
# Each step's groups (rows) of answers' rewards, NaN censored.
GROUPS = {
    2: [[0.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]],
    3: [[0.0, 1.0], [1.0, 1.0], [NaN, NaN], [0.0, 0.0]],
    4: [[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 0.0]],
}


def step_values(step):
    rewards = torch.tensor(GROUPS[step])
    return {"reward/mean": 0.5, **group_signal_metrics(rewards, torch.full(rewards.shape, 7, dtype=torch.long))}


def chart(page, name):
    return page.evaluate("name => document.querySelector(`[data-chart=${name}]`)?.stepChart?.plot?.data ?? null", name)


def test_the_group_signal_chart_draws_the_apis_four_shares_and_a_gap_where_a_step_did_not_sort_its_groups(
        page, alice, make_run):
    run = make_run(state=RunState.STARTING, name="signal run")
    started = time.time() - 60
    publish(run, EventType.RUN_STARTED, {"step": 0, "total_steps": 4}, at=started)
    # Step 1 as a trainer from before issue 47 reports it: no group shares.
    publish(run, EventType.METRICS, {"step": 1, "values": {"reward/mean": 0.0}}, at=started + 1)
    publish(run, EventType.METRICS, {"step": 2, "values": step_values(2)}, at=started + 2)
    wait_for_state(run, RunState.RUNNING)

    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    for step in (3, 4):  # published while the page watches
        publish(run, EventType.METRICS, {"step": step, "values": step_values(step)}, at=started + step)
    wait_until(lambda: (chart(page, "group_signal") or [[]])[0] == [1, 2, 3, 4], what="steps 3 and 4 on the chart")

    response = page.request.get(f"/api/runs/{run.pk}/series")
    assert response.ok
    series = response.json()["metrics"]
    assert [row["step"] for row in series] == [1, 2, 3, 4]
    drawn = chart(page, "group_signal")
    for index, name in enumerate(SHARES, start=1):
        assert drawn[index] == [row["values"].get(name) for row in series], name
    # What the API gave is what the trainer computed: step 3 has one group of each kind.
    assert [drawn[index][2] for index in range(1, 5)] == [0.25, 0.25, 0.25, 0.25]
    assert drawn[1][0] is None  # step 1 sorted nothing: a gap, never a 0
    legend = page.locator("[data-chart=group_signal] .u-legend").inner_text()
    assert all(LABELS[name] in legend for name in SHARES), legend
