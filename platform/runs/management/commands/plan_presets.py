"""Make the learner memory plan of every GPU preset now, so that no launch waits for it (run it after
migrate when deploying: a plan is half a minute of CPU, made once per torch, transformers and plan version)."""

import time

from django.core.management.base import BaseCommand, CommandError

from runs.models import LearnerPlan
from trainer.config import PRESETS, RunConfig


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser):
        parser.add_argument("--preset", action="append", default=[], choices=sorted(PRESETS),
                            help="Only this preset (repeatable; default: every preset that runs on GPUs).")

    def handle(self, *args, preset, **options):
        configs = [RunConfig.from_preset(name) for name in preset or sorted(PRESETS)]
        cpu_only = [config.preset for config in configs if config.cluster.num_gpus == 0]
        if preset and cpu_only:
            raise CommandError(f"{', '.join(cpu_only)} runs on CPU: it has no GPU memory to plan")
        for config in configs:
            if config.cluster.num_gpus == 0:
                continue
            was_planned = LearnerPlan.objects.of(config).exists()
            started = time.monotonic()
            learner = LearnerPlan.objects.for_config(config)
            self.stdout.write(f"{config.preset}: learner peak {learner.peak_bytes / 1024**3:.1f} GiB per rank, "
                              + ("already planned" if was_planned else f"planned in {time.monotonic() - started:.0f} s"))
