"""The base of every API input schema: a field the endpoint does not know is an error, never ignored.

A script that misspells a field (``"eval_fractoin"``) or sends one the endpoint does not take
(``"total_steps": 0`` at the top level) must learn it from a 422 naming the field, not find
later that the default it did not ask for was used.
"""

from ninja import Schema
from ninja.errors import HttpError
from pydantic import ConfigDict


class StrictSchema(Schema):
    model_config = ConfigDict(extra="forbid")


def refuse_unknown_fields(received, schema: type[Schema], *, also: tuple[str, ...] = ()) -> None:
    """The same rule for query strings and forms, which django-ninja maps field by field (so an
    unknown key never reaches pydantic's ``extra="forbid"``): 422 naming each unknown key."""
    known = {*schema.model_fields, *also}
    unknown = sorted(set(received) - known)
    if unknown:
        raise HttpError(422, f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                             f"this endpoint takes {', '.join(sorted(known))}")
