"""Import a dataset from the Hugging Face Hub, or a dataset folder, for a person: the same path as the upload
page's Hub form (staged as JSON Lines, then checked and imported all or nothing), run in this process."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from promptsets import uploads, versions
from promptsets.hub_import import HubSource, HubSourceError
from promptsets.intake import RowRejection
from promptsets.management.commands._options import (
    add_promptset_options, add_row_options, column_mapping, owner_named, row_limits,
)
from promptsets.models import PromptsetUpload, UploadState
from promptsets.upload_contract import import_options


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
        add_promptset_options(parser, what="dataset")

    def handle(self, *args, **options):
        owner = owner_named(options["owner"])
        choices = import_options(
            file_format=None, mapping=column_mapping(options["column"]), skip_invalid_rows=options["skip_invalid_rows"],
            description=options["description"], is_public=options["public"], default_header=options["default_header"],
            limits=row_limits(options))
        try:
            source = HubSource.from_fields(dataset=options["dataset"], folder=options["folder"], config=options["config"],
                                           split=options["split"], revision=options["revision"])
            upload = uploads.stage_dataset_import(owner, options["name"], source, options=choices,
                                                  check_in_this_process=True)
        except (HubSourceError, versions.PromptsetNameTaken) as error:
            raise CommandError(str(error)) from None
        uploads.run_upload(upload.pk)
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
