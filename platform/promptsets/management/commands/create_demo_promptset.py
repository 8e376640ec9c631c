"""Create (once) the public demo promptset (closed arithmetic the stand-in Lean server decides) and the smoke promptset."""

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
        for create in (versions.create_demo_promptset, versions.create_smoke_promptset):
            promptset, is_created = create(owner)
            verb = "Created" if is_created else "Already present:"
            self.stdout.write(f"{verb} promptset {promptset.pk} ({promptset.name!r}), "
                              f"{promptset.latest_version.problem_count} problems")
