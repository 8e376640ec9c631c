"""Rollouts stored the way the ingester stores them, for the viewer's tests."""

import itertools

import pytest

_keys = itertools.count()


@pytest.fixture
def make_attempt():
    from proofs.models import ProofAttempt

    def make(run, **fields):
        defaults = {
            "rollout_key": f"s{fields.get('step', 0)}-r{next(_keys)}", "step": 0, "problem_key": "add_small",
            "problem_name": "add_small", "turn": "first", "verdict": "lean_error", "reward": 0.0,
            "reasoning": "I will use norm_num.", "lean_code": "theorem add_small : (2 : ℕ) + 3 = 5 := by\n  simp",
            "lean_messages": [{"severity": "error", "line": 2, "column": 2, "end_line": 2, "end_column": 6,
                               "text": "simp made no progress"}],
        }
        return ProofAttempt.objects.create(run=run, **{**defaults, **fields})

    return make


@pytest.fixture
def logged_in(client):
    def log_in(user):
        client.force_login(user)
        return client

    return log_in


@pytest.fixture
def listed_keys():
    """The rollout keys the rollout list API returns for ``query``, newest first (asserting it answered)."""
    def keys(client, run, query: str) -> list[str]:
        response = client.get(f"/api/proofs/runs/{run.pk}/rollouts?{query}")
        assert response.status_code == 200, response.content
        return [r["rollout_key"] for r in response.json()["rollouts"]]

    return keys
