"""Import a dataset from the Hugging Face Hub, or a dataset folder, for a person: the same path as the upload
page's Hub form (staged as JSON Lines, then checked and imported all or nothing), run in this process."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from promptsets import actions
from promptsets.forms import import_options
from promptsets.hub_import import HubSource, HubSourceError
from promptsets.intake import RowRejection
from promptsets.management.commands._options import add_row_options, column_mapping, row_limits
from promptsets.models import PromptsetUpload, UploadState


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser):
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--dataset", help="owner/name on the Hub, e.g. AI-MO/NuminaMath-LEAN (needs the network).")
        where.add_argument("--folder", help="A dataset folder (the Hub's layout, or save_to_disk's) under one of "
                                            "PROMPTSET_IMPORT_ROOTS.")
        parser.add_argument("--config", help="The dataset's config (default: its default one).")
        parser.add_argument("--split", default="train")
        parser.add_argument("--revision", help="A branch, tag or commit (default: main).")
        add_row_options(parser)
        parser.add_argument("--owner", required=True, help="Username of the owner.")
        parser.add_argument("--name", required=True, help="The promptset's name (unique per owner).")
        parser.add_argument("--description", default="")
        parser.add_argument("--public", action="store_true", help="Visible to every signed-in person.")
        parser.add_argument("--skip-invalid-rows", action="store_true",
                            help="Import the valid rows and report the others (default: reject the dataset).")

    def handle(self, *args, **options):
        owner = get_user_model().objects.filter(username=options["owner"]).first()
        if owner is None:
            raise CommandError(f"no user named {options['owner']!r}: create it first (manage.py createsuperuser)")
        choices = import_options(
            file_format="jsonl", mapping=column_mapping(options["column"]), skip_invalid_rows=options["skip_invalid_rows"],
            description=options["description"], is_public=options["public"], default_header=options["default_header"],
            limits=row_limits(options))
        try:
            source = HubSource(name=options["dataset"] or "", path=options["folder"] or "", config=options["config"],
                               split=options["split"], revision=options["revision"])
            upload = actions.stage_dataset_import(owner, options["name"], source, options=choices,
                                                  check_in_this_process=True)
        except (HubSourceError, actions.PromptsetNameTaken) as error:
            raise CommandError(str(error)) from None
        actions.run_upload(upload.pk)
        upload = PromptsetUpload.objects.get(pk=upload.pk)
        rejections = [RowRejection(**rejection) for rejection in upload.report.get("rejections", [])]
        if upload.state != UploadState.IMPORTED:
            for rejection in rejections:
                self.stderr.write(rejection.describe())
            raise CommandError(upload.failure)
        for rejection in rejections:
            self.stderr.write(f"skipped {rejection.describe()}")
        self.stdout.write(f"Imported promptset {upload.promptset_id} ({upload.name!r}) v1 from {upload.filename}: "
                          f"{upload.report['summary']}")
