"""Migration proofs/0010 creates every problem's history and fills it from the rollouts already stored, one run at
a time, each run in a transaction of its own (the migration is not atomic), so it never holds the whole rollouts
table; its counts are the ingester's: censored answers are answers but not scores, a retry is round 1 or more,
the stand-in's verdicts are rows of their own."""

from importlib import import_module

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from promptsets.models import statement_hash
from proofs.models import ProblemHistory

BEFORE = ("proofs", "0009_proof_attempt_tool_calls")
STATEMENT = "theorem add_small : (2 : ℕ) + 3 = 5 := by"


def test_the_history_migration_is_not_one_transaction():
    assert import_module("proofs.migrations.0010_problem_history").Migration.atomic is False


@pytest.mark.django_db(transaction=True)  # outside the test's own transaction, as manage.py runs it
def test_migrating_records_every_runs_rollouts_once():
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    apps = executor.loader.project_state([BEFORE]).apps
    owner = apps.get_model(settings.AUTH_USER_MODEL).objects.create(username="alice")
    promptset = apps.get_model("promptsets", "Promptset").objects.create(owner=owner, name="arith")
    version = apps.get_model("promptsets", "PromptsetVersion").objects.create(promptset=promptset, number=1)
    problem = apps.get_model("promptsets", "Problem").objects.create(
        promptset=promptset, problem_key="add_small", formal_statement=STATEMENT, statement_hash=statement_hash(STATEMENT))
    run = apps.get_model("runs", "Run").objects.create(owner=owner, name="before", promptset_version=version,
                                                       preset="cpu-demo", config={})
    ProofAttempt = apps.get_model("proofs", "ProofAttempt")
    for key, reward, turn, standin in [("s1-r0", 1.0, "first", False), ("s1-r1", 0.0, "first", False),
                                       ("s1-r2", None, "first", False), ("s1-r3", 1.0, "first", True),
                                       ("s2-retry", 1.0, "retry", False)]:
        ProofAttempt.objects.create(run=run, rollout_key=key, step=1 if key.startswith("s1") else 2, problem=problem,
                                    problem_key="add_small", formal_statement=STATEMENT, turn=turn, reward=reward,
                                    is_censored=reward is None, is_standin_verdict=standin)

    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert sorted(ProblemHistory.objects.filter(run_id=run.pk).values_list(
        "statement_hash", "step", "round", "is_standin", "answers", "scored", "accepted")) == [
        (statement_hash(STATEMENT), 1, 0, False, 3, 2, 1),
        (statement_hash(STATEMENT), 1, 0, True, 1, 1, 1),
        (statement_hash(STATEMENT), 2, 1, False, 1, 1, 1),
    ]

