from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import ApiToken


class Command(BaseCommand):
    help = "Issue an API token for a user (printed once; send it as `Authorization: Bearer TOKEN`)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="command line")

    def handle(self, *args, username, name, **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}; create it first (manage.py createsuperuser)")
        _, raw = ApiToken.issue(user, name)
        self.stdout.write(raw)
