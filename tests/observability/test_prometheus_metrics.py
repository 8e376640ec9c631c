"""/metrics gives Prometheus the platform's state, read from the database and Redis at scrape time,
and only to a scraper with the token or a staff member."""

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.django_db


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


@pytest.fixture
def scraper(client, settings):
    settings.METRICS_TOKEN = "scrape-secret"
    return lambda: scrape(client, HTTP_AUTHORIZATION="Bearer scrape-secret")


def test_metrics_refuse_strangers_and_wrong_tokens(client, settings, alice):
    settings.METRICS_TOKEN = "scrape-secret"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    client.force_login(alice)
    assert client.get("/metrics").status_code == 401


def test_a_staff_member_may_read_metrics_without_the_token(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("ops", password="ops-password", is_staff=True))
    assert ("leanrl_run_queue_length", ()) in scrape(client)


def test_runs_are_counted_by_state_and_the_queue_length_is_the_queued_runs(scraper, make_run):
    for state in ("queued", "queued", "running", "failed"):
        make_run(state=state)
    samples = scraper()
    assert samples[("leanrl_runs", (("state", "queued"),))] == 2
    assert samples[("leanrl_runs", (("state", "running"),))] == 1
    assert samples[("leanrl_runs", (("state", "succeeded"),))] == 0
    assert samples[("leanrl_run_queue_length", ())] == 2
    assert samples[("leanrl_dead_letters", ())] == 0


def test_pending_entries_count_what_the_ingester_has_not_stored(scraper, make_run, settings):
    from runs.streams import GROUP
    from trainer.observability.events import stream_key

    run = make_run(state="running")
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = stream_key(str(run.pk))
    client.delete(key)
    client.xgroup_create(key, GROUP, id="0", mkstream=True)
    for index in range(3):
        client.xadd(key, {"event": f"e{index}"})
    client.xreadgroup(GROUP, "reader", {key: ">"}, count=1)  # one delivered, not acknowledged
    samples = scraper()
    assert samples[("leanrl_ingester_pending_entries", ())] == 3
    assert 0 <= samples[("leanrl_ingester_lag_seconds", ())] < 60
    assert samples[("leanrl_redis_up", ())] == 1
    for entry_id, _ in client.xrange(key):
        client.xack(key, GROUP, entry_id)
    client.xreadgroup(GROUP, "reader", {key: ">"})
    for entry_id, _ in client.xrange(key):
        client.xack(key, GROUP, entry_id)
    samples = scraper()
    assert samples[("leanrl_ingester_pending_entries", ())] == 0
    assert samples[("leanrl_ingester_lag_seconds", ())] == 0
    client.delete(key)


def test_verifier_figures_come_from_each_active_runs_latest_step(scraper, make_run):
    running = make_run(state="running")
    running.step_metrics.create(step=1, values={"rollouts": 10, "censored": 5, "time/verification_total_s": 40.0})
    running.step_metrics.create(step=2, values={"rollouts": 8, "censored": 2, "time/verification_total_s": 4.0})
    finished = make_run(state="succeeded")
    finished.step_metrics.create(step=1, values={"rollouts": 8, "censored": 8, "time/verification_total_s": 8.0})
    samples = scraper()
    assert samples[("leanrl_verifier_seconds_per_proof", (("run", str(running.pk)),))] == 0.5
    assert samples[("leanrl_verifier_censored_share", (("run", str(running.pk)),))] == 0.25
    assert ("leanrl_verifier_censored_share", (("run", str(finished.pk)),)) not in samples


def test_an_unreachable_redis_is_reported_as_down_not_as_zero_pending(scraper, make_run, settings):
    from deploy.services import free_port

    make_run(state="running")
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    samples = scraper()
    assert samples[("leanrl_redis_up", ())] == 0
    assert ("leanrl_ingester_pending_entries", ()) not in samples
