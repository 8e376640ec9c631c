import signal

from django.core.management.base import BaseCommand

from runs.ingest import EventIngester


class Command(BaseCommand):
    help = "Store trainer events from Redis Streams in Postgres and forward them to browsers (runs whose job died: sweep_runs)."

    def handle(self, *args, **options):
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
        EventIngester().run_forever(should_stop=lambda: bool(stopping))
