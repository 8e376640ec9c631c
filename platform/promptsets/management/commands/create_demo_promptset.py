"""Create (once) the public demo promptset of closed arithmetic that the stand-in Lean server decides."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from promptsets import actions


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser):
        parser.add_argument("--owner", required=True, help="Username of the owner.")

    def handle(self, *args, **options):
        owner = get_user_model().objects.filter(username=options["owner"]).first()
        if owner is None:
            raise CommandError(f"no user named {options['owner']!r}: create it first (manage.py createsuperuser)")
        promptset, is_created = actions.create_demo_promptset(owner)
        verb = "Created" if is_created else "Already present:"
        self.stdout.write(f"{verb} promptset {promptset.pk} ({promptset.name!r}), "
                          f"{promptset.latest_version.problem_count} problems")
