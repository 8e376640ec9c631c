"""Migration proofs/0007 adds the rollouts' stored text-search column and its GIN index. The column is computed for
every row, which PostgreSQL does by rewriting the table under an exclusive lock (docs/operations/index.md,
"Upgrading", says how long and how to run it); the index is then built CONCURRENTLY, so that on a large rollouts
table the ingester's writes and the viewer's reads go on while it is built. CONCURRENTLY cannot run inside a
transaction, so the migration is not atomic: migrating through it on the real PostgreSQL proves it runs."""

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE, TEXT_SEARCH = "0006_proof_attempt_policy_version", "0007_rollout_text_search"


def sql_of(migration: str) -> str:
    out = io.StringIO()
    call_command("sqlmigrate", "proofs", migration, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)  # outside the test's own transaction, as manage.py runs it
def test_the_index_is_built_concurrently_outside_a_transaction():
    sql = sql_of(TEXT_SEARCH)
    assert 'CREATE INDEX CONCURRENTLY "attempt_text_search"' in sql
    assert "BEGIN;" not in sql


@pytest.mark.django_db(transaction=True)
def test_migrating_through_it_on_postgresql_leaves_a_valid_index():
    executor = MigrationExecutor(connection)
    executor.migrate([("proofs", BEFORE)])
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    with connection.cursor() as cursor:
        cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = 'attempt_text_search'::regclass")
        assert cursor.fetchone() == (True,)  # a concurrent build that failed leaves an invalid index behind
