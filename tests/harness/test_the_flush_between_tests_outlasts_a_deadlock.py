"""The suite empties its database after each transactional test while the platform's own processes (the
sweeper, the ingester) may be reading it. A deadlock between them must not fail the test that happened
to be tearing down (as it once failed CI)."""

import re
import threading

import pytest
from django.core.management import call_command
from django.core.management.color import no_style
from django.core.management.sql import sql_flush
from django.db import connection, transaction

pytestmark = pytest.mark.django_db(transaction=True)


def _truncated_tables() -> list[str]:
    """The tables in the order the flush's TRUNCATE locks them."""
    (statement,) = sql_flush(no_style(), connection)
    return re.findall(r'"([^"]+)"', statement)


def _waits_for_a_lock(cursor, pid: int) -> bool:
    cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)", [pid])
    return cursor.fetchone()[0]


def test_a_flush_that_deadlocks_with_a_reader_is_tried_again(alice):
    tables = _truncated_tables()
    first, last = tables[0], tables[-1]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        flushing_pid = cursor.fetchone()[0]
    holding_last = threading.Event()
    reader_saw = []

    def reader():
        """A transaction like the scheduler's: it reads one table, then another."""
        from django.db import connection as own_connection

        try:
            with transaction.atomic(), own_connection.cursor() as cursor:
                # Long enough that Postgres picks the TRUNCATE as the deadlock's victim, as it may in the suite.
                cursor.execute("SET LOCAL deadlock_timeout = '20s'")
                cursor.execute(f'SELECT count(*) FROM "{last}"')
                holding_last.set()
                while not _waits_for_a_lock(cursor, flushing_pid):
                    threading.Event().wait(0.02)
                cursor.execute(f'SELECT count(*) FROM "{first}"')
                reader_saw.append("read both tables")
        finally:
            own_connection.close()

    thread = threading.Thread(target=reader)
    thread.start()
    assert holding_last.wait(10)
    try:
        call_command("flush", verbosity=0, interactive=False)
    finally:
        thread.join(30)
    assert reader_saw == ["read both tables"]
    from django.contrib.auth import get_user_model

    assert not get_user_model().objects.exists(), "the flush did not empty the database"
