import signal

from django.core.management.base import BaseCommand

from runs.sweeper import Sweeper


class Command(BaseCommand):
    help = ("Keep runs and Ray jobs in step: dispatch runs queued too long again, adopt or requeue runs stuck "
            "starting, end runs whose job ended without a word, stop jobs whose run is final.")

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="One pass, then exit (for cron or a check).")
        parser.add_argument("--every", type=float, default=None, help="Seconds between passes (default SWEEP_EVERY_S).")

    def handle(self, *args, once=False, every=None, **options):
        if once:
            Sweeper().sweep_once()
            return
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
        Sweeper().run_forever(should_stop=lambda: bool(stopping), every_s=every)
