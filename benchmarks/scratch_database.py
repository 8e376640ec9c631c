"""A migrated PostgreSQL for a benchmark: the one DATABASE_URL names, or an embedded one of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[1]


@contextmanager
def migrated_database(scratch: Path) -> Iterator[str]:
    """Sets DATABASE_URL (starting a server under ``scratch`` unless one is named), migrates, yields the URL."""
    postgres = None
    if "DATABASE_URL" not in os.environ:
        from deploy.services import PostgresService, free_port

        os.chmod(scratch, 0o755)  # the embedded server may run as its own unprivileged user
        postgres = PostgresService(name="postgres", port=free_port(), log_dir=scratch / "logs",
                                   data_dir=scratch / "postgres")
        postgres.start()
        os.environ["DATABASE_URL"] = postgres.url
    try:
        subprocess.run([sys.executable, str(REPO_DIR / "manage.py"), "migrate", "--skip-checks", "-v", "0"], check=True,
                       env=os.environ.copy())
        yield os.environ["DATABASE_URL"]
    finally:
        if postgres is not None:
            postgres.stop()
