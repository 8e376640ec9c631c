import os
import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def data_dir():
    """The stack's data folder, outside pytest's own temporary root: PostgreSQL runs as an unprivileged
    user when the tests run as root, and pytest keeps its root private to root (and resets it so
    whenever another pytest on the machine starts)."""
    folder = Path(tempfile.mkdtemp(prefix="leanrl-stack-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
