from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the demo account if it does not exist (the password is reset only with --reset-password)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="lean-rl-demo")
        parser.add_argument("--reset-password", action="store_true")

    def handle(self, *args, username, password, reset_password, **options):
        user, created = get_user_model().objects.get_or_create(username=username)
        if created or reset_password:
            user.set_password(password)
            user.save()
        self.stdout.write(f"{'created' if created else 'kept'} account {username!r}")
