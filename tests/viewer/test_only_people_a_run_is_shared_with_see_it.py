"""A run's pages, API and downloads answer its owner and the people it is shared with; nobody else learns it exists."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared_run(make_run, bob, make_attempt):
    run = make_run(state="running", name="the shared run")
    run.shared_with.add(bob)
    attempt = make_attempt(run)
    run.checkpoints.create(step=5, path="/nonexistent/step_000005")
    return run, attempt


def urls(run, attempt):
    return [
        f"/runs/{run.pk}/", f"/proofs/{attempt.pk}/", f"/api/runs/{run.pk}", f"/api/runs/{run.pk}/series",
        f"/api/proofs/runs/{run.pk}/rollouts", f"/api/proofs/attempts/{attempt.pk}/code",
        f"/api/proofs/attempts/{attempt.pk}",
    ]


def test_the_owner_sees_every_page_and_endpoint(shared_run, alice, logged_in):
    client = logged_in(alice)
    assert [client.get(url).status_code for url in urls(*shared_run)] == [200] * 7


def test_a_person_the_run_is_shared_with_sees_them_too(shared_run, bob, logged_in):
    client = logged_in(bob)
    assert [client.get(url).status_code for url in urls(*shared_run)] == [200] * 7


def test_a_stranger_gets_not_found_everywhere(shared_run, charlie, logged_in):
    client = logged_in(charlie)
    run, _ = shared_run
    answers = [client.get(url).status_code for url in [*urls(*shared_run), f"/runs/{run.pk}/checkpoints/5/model.zip"]]
    assert answers == [404] * 8


def test_a_stranger_sees_neither_the_run_in_the_list_nor_in_a_comparison(shared_run, charlie, logged_in):
    client = logged_in(charlie)
    run, _ = shared_run
    assert client.get("/api/runs/summaries").json() == []
    assert run.name not in client.get(f"/runs/compare/?runs={run.pk}").content.decode()


def test_a_stranger_cannot_diff_against_someone_elses_configuration(make_run, charlie, logged_in):
    secret = make_run(name="alice's secret run")
    own = make_run(owner=charlie, name="charlie's run")
    page = logged_in(charlie).get(f"/runs/{own.pk}/?diff={secret.pk}").content.decode()
    assert "alice&#x27;s secret run" not in page and 'id="config-diff"' not in page


def test_someone_not_logged_in_is_sent_to_the_login_page(shared_run, client):
    run, attempt = shared_run
    for url in (f"/runs/{run.pk}/", f"/proofs/{attempt.pk}/", "/runs/"):
        assert client.get(url).url.startswith("/login/")
    assert client.get(f"/api/proofs/runs/{run.pk}/rollouts").status_code == 401


def test_only_the_owner_may_cancel(shared_run, bob, logged_in):
    run, _ = shared_run
    assert logged_in(bob).post(f"/runs/{run.pk}/cancel/").status_code == 403
    run.refresh_from_db()
    assert run.state == "running"
