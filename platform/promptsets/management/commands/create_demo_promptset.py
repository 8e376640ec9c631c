"""Create (once) the public demo promptset of closed arithmetic that the stand-in Lean server decides."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from promptsets import versions
from promptsets.management.commands._options import owner_named


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser):
        parser.add_argument("--owner", required=True, help="Username of the owner.")

    def handle(self, *args, **options):
        owner = owner_named(options["owner"])
        promptset, is_created = versions.create_demo_promptset(owner)
        verb = "Created" if is_created else "Already present:"
        self.stdout.write(f"{verb} promptset {promptset.pk} ({promptset.name!r}), "
                          f"{promptset.latest_version.problem_count} problems")
