"""The run event streams in Redis, as the platform's ingester group reads them: where the group stands
in a stream (what it has not acknowledged yet), entry ids, and Redis's bytes as text.

The one reader of a group's position: the ingester trims and deletes streams by it, /metrics reports it.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

GROUP = "platform-ingester"


def as_text(value) -> str:
    """Redis answers in bytes: text, whatever bytes they were (undecodable ones escaped)."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def _next_id(entry_id: str) -> str:
    milliseconds, _, sequence = entry_id.partition("-")
    return f"{milliseconds}-{int(sequence or 0) + 1}"


def _id_key(entry_id: str) -> tuple[int, int]:
    milliseconds, _, sequence = entry_id.partition("-")
    return int(milliseconds), int(sequence or 0)


@dataclass(frozen=True)
class StreamBacklog:
    """Where the ingester's group stands in one run's stream: what it has not acknowledged yet."""

    has_group: bool  # False: no ingester has read the stream yet, and all of it is undelivered
    pending: int  # delivered to an ingester, not yet acknowledged (stored)
    undelivered: int  # delivered to no ingester yet
    oldest_id: str | None  # the oldest entry not yet acknowledged, None when there is none
    last_delivered_id: str

    @property
    def unacknowledged(self) -> int:
        return self.pending + self.undelivered

    @property
    def is_drained(self) -> bool:
        """Every entry read and acknowledged: the stream may go once its run is over."""
        return self.has_group and self.unacknowledged == 0

    @property
    def trim_to(self) -> str | None:
        """The id everything before which is acknowledged (XTRIM MINID), None when nothing is."""
        if self.pending:
            return self.oldest_id
        return _next_id(self.last_delivered_id) if self.last_delivered_id != "0-0" else None


def stream_backlog(client: redis.Redis, key: str) -> StreamBacklog | None:
    """The ingester group's backlog in the stream ``key``; None when there is no such stream.

    The one reader of a group's position (the ingester trims and deletes streams by it, /metrics
    reports it). A few commands whatever the backlog: the count of entries not yet delivered is
    Redis 7's ``lag`` (XINFO GROUPS), never a walk over them. Where Redis cannot know the lag (it
    says null only after an XDEL inside the undelivered range, which the platform never sends),
    undelivered counts 1 if anything is: at least.
    """
    try:
        groups = {as_text(g["name"]): g for g in client.xinfo_groups(key)}
    except redis.ResponseError:  # no such stream
        return None
    group = groups.get(GROUP)
    if group is None:
        first = client.xrange(key, count=1)
        return StreamBacklog(has_group=False, pending=0, undelivered=client.xlen(key),
                             oldest_id=as_text(first[0][0]) if first else None, last_delivered_id="0-0")
    last_delivered = as_text(group["last-delivered-id"])
    summary = client.xpending(key, GROUP)
    pending = summary["pending"]
    undelivered = group.get("lag")
    if undelivered is None:
        last_entry = as_text(client.xinfo_stream(key).get("last-generated-id") or "0-0")
        undelivered = int(_id_key(last_delivered) < _id_key(last_entry))
    oldest = as_text(summary["min"]) if pending else None
    if oldest is None and undelivered:
        first_undelivered = client.xrange(key, min=f"({last_delivered}", max="+", count=1)
        oldest = as_text(first_undelivered[0][0]) if first_undelivered else None
    return StreamBacklog(has_group=True, pending=pending, undelivered=undelivered, oldest_id=oldest,
                         last_delivered_id=last_delivered)


def entry_milliseconds(entry_id: str) -> int:
    """When Redis added the entry, in Unix milliseconds (its id's first part)."""
    return _id_key(entry_id)[0]
