"""API tokens, so that scripts and notebooks can use the JSON API without a browser session."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "lrl_"
DEFAULT_LIFETIME_DAYS = 90


class TokenScope(models.TextChoices):
    READ = "read", "Read only (GET: runs, rollouts, promptsets)"
    LAUNCH = "launch", "Launch (read, and launch, cancel, resume, upload, curate)"


def _digest(raw_token: str) -> str:
    return hashlib.sha256(raw_token.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def find(self, raw_token: str):
        """The live token (not expired, its user active), its last use recorded; None otherwise. Only the
        digest is stored, so a leaked database leaks no tokens."""
        if not raw_token.startswith(TOKEN_PREFIX):
            return None
        now = timezone.now()
        token = (self.select_related("user").filter(digest=_digest(raw_token), user__is_active=True)
                 .filter(models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)).first())
        if token is None:
            return None
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'eval notebook'.")
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    scope = models.CharField(max_length=8, choices=TokenScope.choices, default=TokenScope.READ,
                             help_text="Read-only tokens may only read (GET); launch tokens may also change things.")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="After this the token is refused.")

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.hint}…)"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def can_write(self) -> bool:
        return self.scope == TokenScope.LAUNCH

    @classmethod
    def issue(cls, user, name: str, *, scope: str = TokenScope.READ,
              lifetime_days: int | None = DEFAULT_LIFETIME_DAYS) -> tuple["ApiToken", str]:
        """A new token; the raw value is returned once and never stored."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        expires_at = timezone.now() + timedelta(days=lifetime_days) if lifetime_days else None
        token = cls.objects.create(user=user, name=name, digest=_digest(raw), hint=raw[:10], scope=TokenScope(scope),
                                   expires_at=expires_at)
        return token, raw
