"""Create (once) the benchmark promptsets that ship with the platform: miniF2F test and valid, public and read-only."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from promptsets import benchmarks


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def handle(self, *args, **options):
        for benchmark, is_created in benchmarks.create_shipped_benchmarks():
            verb = "Created" if is_created else "Already present:"
            self.stdout.write(f"{verb} benchmark {benchmark.name!r} ({benchmark.version.problem_count} problems)")
