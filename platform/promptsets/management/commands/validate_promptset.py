"""Print the per-row report of a promptset file without storing anything.

Exits 1 when any row is rejected or the file cannot be read, so it can gate a pipeline.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from promptsets.intake import FileCheck
from promptsets.management.commands._options import ReadingShown, add_file_options, column_mapping, row_limits


class Command(BaseCommand):
    help = __doc__.splitlines()[0]
    requires_system_checks = []

    def add_arguments(self, parser):
        add_file_options(parser)
        parser.add_argument("--json", action="store_true", help="Print the report as one JSON object.")

    def handle(self, *args, **options):
        try:
            file = open(options["file"], "rb")
        except OSError as error:
            raise CommandError(f"cannot open {options['file']!r}: {error.strerror}") from None
        with file:
            check = FileCheck(file, filename=options["file"], file_format=options["format"],
                              mapping=column_mapping(options["column"]), limits=row_limits(options),
                              default_header=options["default_header"])
            for _ in ReadingShown(check).candidates():
                pass
        report = check.report
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        else:
            for rejection in report.rejections:
                self.stdout.write(rejection.describe())
            if report.columns:
                self.stdout.write("columns: " + ", ".join(f"{c} -> {f}" for f, c in report.columns.items()))
            self.stdout.write(report.summary())
        if not report.is_clean:
            raise SystemExit(1)
