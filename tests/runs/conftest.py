import time

import pytest


@pytest.fixture
def running_run(make_run):
    """A run whose trainer is starting: the ingester takes its events."""
    return make_run(state="starting")


@pytest.fixture
def redis_client():
    """The session's Redis; each test's run streams are removed afterwards (run ids restart per test)."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    for key in client.scan_iter("trainer:run:*"):
        client.delete(key)


@pytest.fixture
def private_redis():
    """A Redis of this test's own, with its append-only file, to stop and start."""
    from deploy.services import RedisService, free_port
    from tests.services_plugin import TEST_ROOT

    service = RedisService(name=f"redis-outage-{free_port()}", port=free_port(), log_dir=TEST_ROOT / "logs",
                           data_dir=TEST_ROOT / f"redis-outage-{time.monotonic_ns()}")
    service.start()
    yield service
    service.stop()
