import signal
import threading

from django.core.management.base import BaseCommand

from runs.live import ProgressForwarder


class Command(BaseCommand):
    help = ("Forward the answers trainers are still writing (rollout_progress, Redis pub/sub) to the run pages "
            "watching them; nothing is stored. Stored events are ingest_events's.")

    def add_arguments(self, parser):
        parser.add_argument("--flush-every-s", type=float, default=0.25,
                            help="Pieces heard within this many seconds go to a run's pages as one message.")

    def handle(self, *args, **options):
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        signal.signal(signal.SIGINT, lambda *_: stopping.set())
        ProgressForwarder(flush_every_s=options["flush_every_s"]).run_forever(should_stop=stopping.is_set)
