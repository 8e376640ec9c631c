from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import DEFAULT_LIFETIME_DAYS, ApiToken, TokenScope


class Command(BaseCommand):
    help = "Issue an API token for a user (printed once; send it as `Authorization: Bearer TOKEN`)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="command line")
        parser.add_argument("--scope", choices=[scope.value for scope in TokenScope], default=TokenScope.READ.value,
                            help="read: GET only; launch: may also launch, cancel, resume, upload and curate")
        parser.add_argument("--days", type=int, default=DEFAULT_LIFETIME_DAYS,
                            help=f"days until it expires (default {DEFAULT_LIFETIME_DAYS}; 0: never)")

    def handle(self, *args, username, name, scope, days, **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}; create it first (manage.py createsuperuser)")
        if days < 0:
            raise CommandError(f"--days must be 0 (never expires) or more, got {days}")
        _, raw = ApiToken.issue(user, name, scope=scope, lifetime_days=days or None)
        self.stdout.write(raw)
