import pytest


@pytest.fixture
def redis_client():
    """The session's Redis; each test's run streams are removed afterwards (run ids restart per test)."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    for key in client.scan_iter("trainer:run:*"):
        client.delete(key)
