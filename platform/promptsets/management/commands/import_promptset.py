"""Import a promptset file for a person: the same validation as the upload form, all or nothing."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from promptsets import versions
from promptsets.intake import FileCheck
from promptsets.management.commands._options import (
    ReadingShown, add_file_options, add_promptset_options, column_mapping, owner_named, row_limits,
)


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser):
        add_file_options(parser)
        add_promptset_options(parser, what="file")

    def handle(self, *args, **options):
        owner = owner_named(options["owner"])
        try:
            file = open(options["file"], "rb")
        except OSError as error:
            raise CommandError(f"cannot open {options['file']!r}: {error.strerror}") from None
        with file:
            try:
                check = FileCheck(file, filename=options["file"], file_format=options["format"],
                                  mapping=column_mapping(options["column"]), limits=row_limits(options),
                                  default_header=options["default_header"])
                result = versions.import_promptset(
                    owner, options["name"], ReadingShown(check), skip_invalid_rows=options["skip_invalid_rows"],
                    description=options["description"], is_public=options["public"],
                )
            except versions.PromptsetNameTaken as error:
                raise CommandError(str(error)) from None
            except versions.ImportRejected as rejected:
                for rejection in rejected.report.rejections:
                    self.stderr.write(rejection.describe())
                raise CommandError(str(rejected)) from None
        for rejection in result.report.rejections:
            self.stderr.write(f"skipped {rejection.describe()}")
        self.stdout.write(f"Imported promptset {result.promptset.pk} ({result.promptset.name!r}) v1: "
                          f"{result.report.summary()}")
