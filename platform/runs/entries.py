"""What a stream entry must be to be stored: a trainer event of the run whose stream it came on, with the
payload its type needs (trainer/observability/events.py's models), in text Postgres can hold.

The ingester (runs/ingest.py) and the sweeper read entries through ``parse_entry``; an entry it refuses
(``Unstorable``) goes to the dead-letter table with the reason.
"""

from __future__ import annotations

import json
import math

from pydantic import ValidationError

from runs.streams import as_text
from trainer.observability.events import PAYLOAD_SCHEMAS, TrainerEvent

RAW_PAYLOAD_LIMIT = 1_000_000
NUL_STAND_IN = "\u2400"  # ␀, SYMBOL FOR NULL: what the viewer shows where the model wrote a NUL


class Unstorable(ValueError):
    """An entry that no retry will store: it goes to the dead-letter table."""


def storable_text(value):
    """``value`` made storable in Postgres text and JSONB (recursively, keys too)."""
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", NUL_STAND_IN)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, from a JSON "\ud800": becomes U+FFFD
            value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or infinity; the trainer's own serialiser writes null too
    if isinstance(value, dict):
        return {storable_text(key): storable_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable_text(item) for item in value]
    return value


def parse_entry(fields: dict, run_id: int) -> TrainerEvent:
    """The event in a stream entry of run ``run_id``'s stream, made storable; ``Unstorable`` says why not."""
    raw = fields.get(b"event", fields.get("event"))
    if raw is None:
        raise Unstorable(f"the entry has no 'event' field (fields: {sorted(as_text(k) for k in fields)[:10]})")
    try:
        # Python's parser, not pydantic's: it reads a lone surrogate ("\ud800") that storable_text then replaces.
        event = TrainerEvent.model_validate(json.loads(raw))
    except (ValueError, UnicodeDecodeError) as error:
        if isinstance(error, ValidationError):
            raise Unstorable(f"not a trainer event: {_short(error)}") from None
        raise Unstorable(f"not a trainer event: not JSON: {error}") from None
    event = event.model_copy(update={"event_id": storable_text(event.event_id), "run_id": storable_text(event.run_id),
                                     "payload": storable_text(event.payload)})
    if event.run_id != str(run_id):
        raise Unstorable(f"published on run {run_id}'s stream but names run {event.run_id!r}")
    if not event.event_id or len(event.event_id) > 64:
        raise Unstorable(f"event_id must be 1 to 64 characters, got {len(event.event_id)}")
    schema = PAYLOAD_SCHEMAS.get(event.type)
    if schema is not None:
        try:
            schema.model_validate(event.payload)
        except ValidationError as error:
            raise Unstorable(f"a {event.type} event whose payload breaks its schema: {_short(error)}") from None
    return event


def _short(error: ValidationError) -> str:
    problems = [f"{'.'.join(str(p) for p in e['loc']) or 'event'}: {e['msg']}" for e in error.errors()[:5]]
    return "; ".join(problems)


def raw_text(fields: dict | None) -> str:
    """An entry's fields as JSON text that Postgres can hold whatever bytes they were (NUL included)."""
    decoded = {as_text(key): as_text(value) for key, value in (fields or {}).items()}
    text = json.dumps(decoded, ensure_ascii=False)  # control characters, NUL too, come out escaped
    return text if len(text) <= RAW_PAYLOAD_LIMIT else text[:RAW_PAYLOAD_LIMIT] + "… (cut)"
