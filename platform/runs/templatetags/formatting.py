"""The one way every page writes a duration, a moment and a number that may not have been measured.

Registered as a template builtin (config/settings.py), so no template formats these by hand;
frontend/src/_dom.js has the same three functions for what the pages update live.
"""

from __future__ import annotations

from datetime import datetime, timezone as dt_timezone

from django import template
from django.utils import timezone

register = template.Library()

# "Not measured" (nothing was counted: no rollout reached Lean, no retry this step): never 0.
NOT_MEASURED = "–"


@register.filter
def duration(seconds) -> str:
    """4213.7 → '1 h 10 min'; 65 → '1 min 05 s'; 5.4 → '5 s'; 0.4 → '0.4 s'; None → '–' (not started)."""
    if seconds is None:
        return NOT_MEASURED
    seconds = max(0.0, float(seconds))
    if seconds < 1:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, rest = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {rest:02d} s"
    return f"{rest} s"


@register.filter
def timestamp(moment) -> str:
    """A moment as '2026-11-30 09:38:12 UTC' (a datetime, an ISO string or Unix seconds); None → '–'."""
    if moment is None or moment == "":
        return NOT_MEASURED
    if isinstance(moment, (int, float)):
        moment = datetime.fromtimestamp(moment, tz=dt_timezone.utc)
    elif isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, dt_timezone.utc)
    return moment.astimezone(dt_timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def measured(value, digits: int = 3) -> str:
    """A metric as the tables show it: '0.250', an integer as is, '–' when it was not measured."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return NOT_MEASURED
    if value != value or value in (float("inf"), float("-inf")):
        return NOT_MEASURED
    # As _dom.js formatNumber: a whole number as is (a count, or a reward of 1), others to `digits` places.
    return str(int(value)) if float(value).is_integer() else f"{value:.{int(digits)}f}"


@register.filter
def share(value) -> str:
    """A share of a whole (0 to 1) as a percentage: 0.545 → '54.5%', 1 → '100%'; not measured → '–', never '0%'."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return NOT_MEASURED
    return f"{value * 100:.1f}".removesuffix(".0") + "%"


@register.filter
def file_size(size) -> str:
    """Bytes in the units people read: '1.6 GB', '523 kB'; None → 'size unknown'."""
    if size is None:
        return "size unknown"
    size = float(size)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" or size >= 100 else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
