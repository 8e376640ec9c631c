"""As root, PostgreSQL runs as a system user that the first start creates. Two test workers (or two
stacks) start their PostgreSQL at the same moment on a machine that has never had that user: both
must start (issue 31: the loser of the useradd race used to error half the suite)."""

import os
import pwd
import subprocess
import threading

import psycopg
import pytest

from deploy.services import PostgresService, ServiceError, free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root runs PostgreSQL as a system user of its own")

# A user of this test's own: the suite's PostgreSQL runs as the real one, which must not be removed under it.
USER = f"leanrl_pg_race_{os.getpid()}"


def user_exists() -> bool:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return False
    return True


@pytest.fixture
def no_system_user():
    subprocess.run(["userdel", USER], capture_output=True)
    assert not user_exists()
    yield
    subprocess.run(["userdel", USER], capture_output=True)


def test_two_services_started_at_once_both_start_and_create_the_user_once(tmp_path, no_system_user):
    services = [PostgresService(name=f"postgres-{n}", port=free_port(), log_dir=tmp_path / "logs",
                                data_dir=tmp_path / f"postgres-{n}", system_user=USER) for n in (1, 2)]
    barrier = threading.Barrier(len(services))
    failures = []

    def start(service):
        barrier.wait()
        try:
            service.start()
        except Exception as error:  # noqa: BLE001 - the assertion below reports it
            failures.append(f"{service.name}: {error}")

    threads = [threading.Thread(target=start, args=(service,)) for service in services]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
        assert failures == []
        for service in services:
            with psycopg.connect(service.url.replace("postgres://", "postgresql://"), connect_timeout=10) as db:
                assert db.execute("SELECT current_user").fetchone() == ("postgres",)
        assert user_exists()
        assert {(service.data_dir / "PG_VERSION").stat().st_uid for service in services} == {pwd.getpwnam(USER).pw_uid}
    finally:
        for service in services:
            service.stop()


def test_a_failed_initdb_says_what_initdb_said(tmp_path, no_system_user):
    data_dir = tmp_path / "postgres"
    data_dir.mkdir()
    (data_dir / "something-else").write_text("a folder initdb will not take over")
    service = PostgresService(name="postgres", port=free_port(), log_dir=tmp_path / "logs", data_dir=data_dir,
                              system_user=USER)
    with pytest.raises(ServiceError) as raised:
        service.start()
    message = str(raised.value)
    assert "initdb" in message and "exited with code 1" in message
    assert "exists but is not empty" in message  # initdb's own words, not only its exit status
