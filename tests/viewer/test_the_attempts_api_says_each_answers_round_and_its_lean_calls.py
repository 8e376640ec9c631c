"""``GET /api/proofs/runs/<id>/attempts`` (what ``leanrl rollouts`` writes as JSON Lines) carries each answer's round
of correction and the Lean checks it asked for inside its reasoning, as stored (``leanrl rollouts --round R`` keeps
one round: tests/cli/test_leanrl_drives_the_real_server.py)."""

import pytest

pytestmark = pytest.mark.django_db

CALL = {"snippet": "theorem t : (1 : ℚ) / 2 + 1 / 2 = 1 := by\n  norm_num", "reply": "Lean accepts this snippet: no errors.",
        "verdict": "valid", "asked_at": 1.5, "answered_at": 1.75}


@pytest.fixture
def chain(make_run, make_attempt):
    run = make_run(state="running")
    first = make_attempt(run, rollout_key="a1-s1-p0-r0", round=0, tool_calls=[CALL])
    retry = make_attempt(run, rollout_key="a1-s2-retry-p0-r0", round=1, turn="retry", parent=first,
                         parent_rollout_key=first.rollout_key)
    return run, first, retry


def test_each_attempt_carries_its_round_and_its_lean_calls(alices_client, chain):
    run, first, retry = chain
    attempts = {a["rollout_key"]: a for a in alices_client.get(f"/api/proofs/runs/{run.pk}/attempts").json()}
    assert (attempts[first.rollout_key]["round"], attempts[retry.rollout_key]["round"]) == (0, 1)
    assert attempts[first.rollout_key]["tool_calls"] == [CALL] and attempts[retry.rollout_key]["tool_calls"] == []

