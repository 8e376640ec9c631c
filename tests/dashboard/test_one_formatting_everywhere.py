"""One way to write a duration, a moment, a size and a value that was not measured, on every page
(templates: runs/templatetags/formatting.py; scripts: frontend/src/_dom.js)."""

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from runs.templatetags.formatting import NOT_MEASURED, duration, file_size, measured, timestamp

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("seconds", "shown"), [
    (None, "–"), (0.4, "0.4 s"), (5.0, "5 s"), (65, "1 min 05 s"), (124.9, "2 min 04 s"), (4213.7, "1 h 10 min"),
])
def test_a_duration_is_written_one_way(seconds, shown):
    assert duration(seconds) == shown


def test_a_moment_is_written_in_utc_with_its_zone_whatever_it_comes_as():
    moment = datetime(2026, 11, 30, 9, 38, 12, tzinfo=timezone.utc)
    for value in (moment, moment.isoformat(), moment.timestamp()):
        assert timestamp(value) == "2026-11-30 09:38:12 UTC"
    assert timestamp(None) == NOT_MEASURED


def test_a_value_that_was_not_measured_is_a_dash_never_zero():
    assert [measured(v) for v in (None, float("nan"), 0.0, 0.25, 1.0, 16)] == ["–", "–", "0", "0.250", "1", "16"]


def test_a_checkpoint_size_reads_in_the_units_people_use():
    assert [file_size(v) for v in (None, 512, 523_000, 1_600_000_000)] == ["size unknown", "512 B", "523 kB", "1.6 GB"]


def test_no_template_or_page_script_formats_a_moment_or_a_duration_by_hand():
    templates = [*ROOT.glob("frontend/templates/**/*.html"), *ROOT.glob("platform/*/templates/**/*.html")]
    by_hand = [f"{path.relative_to(ROOT)}: {match}" for path in templates
               for match in re.findall(r"\|(?:date|time|floatformat)\b[^}]*", path.read_text())]
    assert by_hand == [], "use the timestamp, duration and measured filters instead:\n" + "\n".join(by_hand)
    scripts = [path for path in ROOT.glob("frontend/src/*.js") if path.name != "_dom.js"]
    by_hand = [f"{path.name}: {line.strip()}" for path in scripts for line in path.read_text().splitlines()
               if "toISOString" in line or "toLocale" in line]
    assert by_hand == [], "use formatTimestamp / formatDuration from _dom.js instead:\n" + "\n".join(by_hand)
