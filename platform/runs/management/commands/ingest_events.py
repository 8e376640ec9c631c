import logging
import signal
import threading

from django.core.management.base import BaseCommand
from django.db import connection

from runs.ingest import Backoff, EventIngester

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = ("Store trainer events from Redis Streams in Postgres and forward them to browsers (never stopped by "
            "an entry, a Redis or a database outage); trim the streams; end runs whose Ray job died.")

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
        # Ray calls can hang for as long as a head is unreachable: they run in their own thread, so
        # live events never wait for them.
        reconciler = threading.Thread(target=_reconcile_forever, args=(stopping,), name="job-reconciler", daemon=True)
        reconciler.start()
        EventIngester(consumer=options["consumer"], claim_idle_ms=options["claim_idle_ms"]).run_forever(
            should_stop=stopping.is_set)
        stopping.set()
        reconciler.join(10)


def _reconcile_forever(stopping: threading.Event) -> None:
    ingester = EventIngester(consumer=None)
    ingester.consumer += "-reconciler"
    backoff = Backoff()
    try:
        while not stopping.wait(ingester.reconcile_every_s):
            try:
                ingester.reconcile_jobs()
            except Exception as error:  # noqa: BLE001 - never die; Ray, Redis or the database will be back
                delay = backoff.delay()
                logger.warning("job reconciliation failed (%s: %s); again in %.1f s", type(error).__name__, error, delay)
                connection.close()
                stopping.wait(delay)
            else:
                backoff.reset()
    finally:
        connection.close()
