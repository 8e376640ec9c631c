import signal
import threading

from django.core.management.base import BaseCommand

from runs.ingest import EventIngester


class Command(BaseCommand):
    help = ("Store trainer events from Redis Streams in Postgres and forward them to browsers (never stopped by "
            "an entry, a Redis or a database outage); trim the streams. Runs whose Ray job died: sweep_runs.")

    def add_arguments(self, parser):
        parser.add_argument("--claim-idle-ms", type=int, default=60_000,
                            help="Claim entries another consumer has left pending this long (a replaced pod's).")
        parser.add_argument("--consumer", default=None,
                            help="This ingester's name in the consumer group (default: the host name, so a restart "
                                 "in place re-reads its own unacknowledged entries first). Give each ingester "
                                 "running on one host its own.")

    def handle(self, *args, **options):
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        signal.signal(signal.SIGINT, lambda *_: stopping.set())
        EventIngester(consumer=options["consumer"], claim_idle_ms=options["claim_idle_ms"]).run_forever(
            should_stop=stopping.is_set)
