"""Import a promptset file for a person: the same validation as the upload form, all or nothing."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from promptsets import actions
from promptsets.intake import FileCheck
from promptsets.management.commands._options import ReadingShown, add_file_options, column_mapping, row_limits


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser):
        add_file_options(parser)
        parser.add_argument("--owner", required=True, help="Username of the owner.")
        parser.add_argument("--name", required=True, help="The promptset's name (unique per owner).")
        parser.add_argument("--description", default="")
        parser.add_argument("--public", action="store_true", help="Visible to every signed-in person.")
        parser.add_argument("--skip-invalid-rows", action="store_true",
                            help="Import the valid rows and report the others (default: reject the file).")

    def handle(self, *args, **options):
        owner = get_user_model().objects.filter(username=options["owner"]).first()
        if owner is None:
            raise CommandError(f"no user named {options['owner']!r}: create it first (manage.py createsuperuser)")
        try:
            file = open(options["file"], "rb")
        except OSError as error:
            raise CommandError(f"cannot open {options['file']!r}: {error.strerror}") from None
        with file:
            try:
                check = FileCheck(file, filename=options["file"], file_format=options["format"],
                                  mapping=column_mapping(options["column"]), limits=row_limits(options),
                                  default_header=options["default_header"])
                result = actions.import_promptset(
                    owner, options["name"], ReadingShown(check), skip_invalid_rows=options["skip_invalid_rows"],
                    description=options["description"], is_public=options["public"],
                )
            except actions.PromptsetNameTaken as error:
                raise CommandError(str(error)) from None
            except actions.ImportRejected as rejected:
                for rejection in rejected.report.rejections:
                    self.stderr.write(rejection.describe())
                raise CommandError(str(rejected)) from None
        for rejection in result.report.rejections:
            self.stderr.write(f"skipped {rejection.describe()}")
        self.stdout.write(f"Imported promptset {result.promptset.pk} ({result.promptset.name!r}) v1: "
                          f"{result.report.summary()}")
