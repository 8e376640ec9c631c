"""Accounts as a lab runs them: throttled logins (django-axes), Django's password rules, tokens with a
scope, an expiry and a last-used time."""

from datetime import timedelta

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from accounts.models import ApiToken, TokenScope
from tests.security.conftest import bearer

pytestmark = pytest.mark.django_db


def log_in(client, password, **headers):
    return client.post(reverse("login"), {"username": "alice", "password": password}, **headers)


def test_five_wrong_passwords_lock_the_account_for_that_address_even_for_the_right_one(client, alice, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert log_in(client, "wrong").status_code == 200  # the form again, with its error
    assert log_in(client, "wrong").status_code == 429  # the fifth failure locks
    locked = log_in(client, "alice-password")
    assert locked.status_code == 429 and "Too many failed logins" in locked.content.decode()
    # A client cannot choose another address to be counted under: only the proxy sets it.
    assert log_in(client, "alice-password", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 429


def test_a_successful_login_resets_the_count(client, alice, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(client, "wrong")
    assert log_in(client, "alice-password").status_code == 302
    client.logout()
    assert log_in(client, "wrong").status_code == 200 and log_in(client, "alice-password").status_code == 302


@pytest.mark.parametrize(("password", "rule"), [
    ("short1!", "too short"), ("password1234", "too common"), ("83749201837465", "entirely numeric"),
    ("alice12", "too similar"),
])
def test_passwords_follow_djangos_validators(alice, password, rule):
    with pytest.raises(ValidationError, match=rule):
        validate_password(password, user=alice)


def test_a_token_is_read_only_and_expires_in_90_days_unless_asked_otherwise(client, alice):
    client.force_login(alice)
    client.post(reverse("accounts:tokens"), {"name": "notebook"})
    token = ApiToken.objects.get()
    assert token.scope == TokenScope.READ
    assert timedelta(days=89) < token.expires_at - timezone.now() <= timedelta(days=90)


def test_the_tokens_page_issues_a_launch_token_and_shows_scope_expiry_and_last_use(client, alice):
    client.force_login(alice)
    page = client.post(reverse("accounts:tokens"), {"name": "launcher", "scope": "launch", "lifetime_days": 7})
    raw = page.context["new_token"]
    token = ApiToken.objects.get()
    assert token.scope == TokenScope.LAUNCH and token.expires_at.date() == (timezone.now() + timedelta(days=7)).date()
    client.logout()
    assert client.get("/api/runs/", **bearer(raw)).status_code == 200
    client.force_login(alice)
    text = client.get(reverse("accounts:tokens")).content.decode()
    assert "Launch (read, and launch" in text and token.expires_at.strftime("%Y-%m-%d") in text and "never" not in text


def test_an_expired_token_is_refused_and_marked_expired(client, alice, token_of):
    raw = token_of(alice, expired=True)
    assert client.get("/api/runs/", **bearer(raw)).status_code == 401
    client.force_login(alice)
    assert "expired" in client.get(reverse("accounts:tokens")).content.decode()


def test_the_command_issues_a_scoped_token_that_never_expires_with_days_0(alice, capsys):
    call_command("create_api_token", "alice", "--scope", "launch", "--days", "0")
    token = ApiToken.objects.find(capsys.readouterr().out.strip())
    assert token.scope == TokenScope.LAUNCH and token.expires_at is None
