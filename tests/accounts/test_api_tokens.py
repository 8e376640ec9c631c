"""Scripts reach the JSON API with a token; the token sees what its person sees, and revoking it ends that."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def bearer(raw):
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def test_a_token_lists_its_owners_runs_and_no_one_elses(client, make_run, alice, charlie):
    run = make_run()
    _, alices = ApiToken.issue(alice, "notebook")
    _, charlies = ApiToken.issue(charlie, "script")
    assert [r["id"] for r in client.get("/api/runs/", **bearer(alices)).json()] == [run.pk]
    assert client.get("/api/runs/", **bearer(charlies)).json() == []
    assert client.get(f"/api/runs/{run.pk}", **bearer(charlies)).status_code == 404


@pytest.mark.parametrize("header", ["Bearer {raw}", "bearer {raw}", "Bearer  {raw}", "Bearer {raw} "])
def test_the_api_and_its_schema_read_the_authorization_header_alike(client, alice, header):
    _, raw = ApiToken.issue(alice, "cli")
    sent = {"HTTP_AUTHORIZATION": header.format(raw=raw)}
    assert client.get("/api/runs/", **sent).status_code == 200
    assert client.get("/api/openapi.json", **sent).status_code == 200


def test_a_wrong_or_revoked_token_is_refused(client, alice):
    token, raw = ApiToken.issue(alice, "old")
    assert client.get("/api/runs/", **bearer(raw + "x")).status_code == 401
    token.delete()
    assert client.get("/api/runs/", **bearer(raw)).status_code == 401


def test_only_a_digest_is_stored_and_the_last_use_is_recorded(client, alice):
    token, raw = ApiToken.issue(alice, "ci")
    assert raw not in token.digest and token.hint == raw[:10]
    client.get("/api/runs/", **bearer(raw))
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_the_tokens_page_shows_a_new_token_once(client, alice):
    client.force_login(alice)
    page = client.post(reverse("accounts:tokens"), {"name": "eval notebook"}).content.decode()
    token = ApiToken.objects.get(user=alice)
    assert 'id="new-token"' in page and token.hint in page
    assert 'id="new-token"' not in client.get(reverse("accounts:tokens")).content.decode()


def test_the_command_issues_a_token_and_names_an_unknown_user(client, alice, make_run, capsys):
    call_command("create_api_token", "alice", "--name", "cli")
    raw = capsys.readouterr().out.strip()
    run = make_run()  # alice's: the token issued for her sees it, as she does
    assert [listed["id"] for listed in client.get("/api/runs/", **bearer(raw)).json()] == [run.pk]
    with pytest.raises(Exception, match="no user named 'nobody'"):
        call_command("create_api_token", "nobody")
