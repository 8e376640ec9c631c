"""Small formatting filters of the run pages."""

from django import template

register = template.Library()


@register.filter
def duration(seconds) -> str:
    """4213.7 → '1 h 10 min'; None → '—' (the trainer has not started)."""
    if seconds is None:
        return "—"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {seconds:02d} s"
    return f"{seconds} s"


@register.filter
def config_value(value) -> str:
    """A configuration value as the trainer's JSON spells it (None → 'null', True → 'true')."""
    import json

    return json.dumps(value) if not isinstance(value, str) else value
