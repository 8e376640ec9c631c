"""Push a promptset version to the Hugging Face Hub as a dataset repository (Parquet and a dataset card)."""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError

from promptsets.export import push_version_to_hub
from promptsets.models import PromptsetVersion


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser):
        parser.add_argument("promptset", type=int, help="The promptset's id.")
        parser.add_argument("version", type=int, help="The version's number.")
        parser.add_argument("repo_id", help="The dataset repository, e.g. lab/minif2f-curated.")
        parser.add_argument("--public", action="store_true", help="A public repository (default: private).")

    def handle(self, *args, **options):
        version = PromptsetVersion.objects.filter(promptset_id=options["promptset"], number=options["version"]).first()
        if version is None:
            raise CommandError(f"promptset {options['promptset']} has no version {options['version']}")
        token = os.environ.get("HF_TOKEN")
        if not token:
            raise CommandError("pushing needs a Hub token with write access in HF_TOKEN")
        try:
            url = push_version_to_hub(version, options["repo_id"], token=token, private=not options["public"],
                                      endpoint=os.environ.get("HF_ENDPOINT"))
        except Exception as error:  # noqa: BLE001 - the Hub's refusals and outages, in one line
            raise CommandError(f"the Hub refused or did not answer: {type(error).__name__}: {error}") from None
        self.stdout.write(url)
