#!/usr/bin/env python
"""Django's command-line utility for the platform."""

import os
import sys
from pathlib import Path

# platform/ is a source root, never a package: a platform/__init__.py would shadow
# the standard library's `platform` module that Django, Celery and Ray import.
sys.path.insert(0, str(Path(__file__).resolve().parent / "platform"))

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
