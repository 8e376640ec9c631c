"""Small formatting filters of the run pages."""

import json

from django import template

register = template.Library()


@register.filter
def config_value(value) -> str:
    """A configuration value as the trainer's JSON spells it (None → 'null', True → 'true')."""
    return json.dumps(value) if not isinstance(value, str) else value
