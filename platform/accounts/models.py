"""API tokens, so that scripts and notebooks can use the JSON API without a browser session."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "lrl_"


def _digest(raw_token: str) -> str:
    return hashlib.sha256(raw_token.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def authenticate(self, raw_token: str):
        """The token's user, or None; only the digest is stored, so a leaked database leaks no tokens."""
        if not raw_token.startswith(TOKEN_PREFIX):
            return None
        token = self.select_related("user").filter(digest=_digest(raw_token), user__is_active=True).first()
        if token is None:
            return None
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
        return token.user


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'eval notebook'.")
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def issue(cls, user, name: str) -> tuple["ApiToken", str]:
        """A new token; the raw value is returned once and never stored."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        return cls.objects.create(user=user, name=name, digest=_digest(raw), hint=raw[:10]), raw
