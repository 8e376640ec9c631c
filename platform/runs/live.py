"""Answers still being written, from the trainer's live channel to the run pages (``manage.py forward_progress``).

The trainer publishes ``rollout_progress`` on a Redis pub/sub channel per run (trainer/observability/live.py), apart
from the durable stream the ingester stores. This forwarder is its own process, so the live text never
competes with stored events for the ingester's time; what it defends:

- **Never stored, never numbered.** Nothing here touches the database's events: a progress frame has
  no ``number``, and a page tells it apart from stored events by its frame type.
- **Dropped, never delayed.** Pieces heard within one ``flush_every_s`` go to a run's Channels group as
  one message (``run.progress``), so progress costs each page a few messages a second however many
  answers stream; a Redis hiccup loses the pieces of that moment and the forwarder subscribes again.
  Each message says when it was sent (``sent_at``): a page that was too busy to read it in time drops it
  unread (frontend/src/_writing.js) and handles the stored events queued behind it at once.
  The stored rollout (``rollout_finished``) replaces the live card, and says everything lost.
- **Shown as stored.** Text goes through ``storable_text`` (NUL → ␀, a lone surrogate → U+FFFD), the
  ingester's own rule, one code point for one, so offsets still count the stored response's characters.
- **Lean highlighted by the one lexer.** When an answer's ```` ```lean4 ```` block closes, its tokens
  come along once (``promptsets.lean_view.highlighted_lines``, trainer/verification/lean_lexer.py underneath).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from promptsets.lean_view import highlighted_lines
from runs.entries import storable_text
from trainer.observability.events import LIVE_CHANNEL_PATTERN, EventType, run_id_of_live_channel, writing_key
from trainer.observability.live import WRITING_EXPIRY_S
from trainer.recipe.format_reward import (
    FENCE,
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_REPLY_CLOSE,
    TOOL_REPLY_OPEN,
)

logger = logging.getLogger(__name__)

LEAN4_OPEN = FENCE + "lean4"
# How a page finds an answer's think and Lean blocks while it forms: the format check's own marks.
ANSWER_MARKS = {"thinkOpen": THINK_OPEN, "thinkClose": THINK_CLOSE, "leanOpen": LEAN4_OPEN, "fence": FENCE,
                # Lean inside the reasoning (rollout.lean_tool_calls): the model's call and Lean's reply
                "toolCallOpen": TOOL_CALL_OPEN, "toolCallClose": TOOL_CALL_CLOSE,
                "toolReplyOpen": TOOL_REPLY_OPEN, "toolReplyClose": TOOL_REPLY_CLOSE}
MAX_TRACKED_ANSWERS = 10_000  # answers whose text the forwarder keeps to find their Lean block (oldest forgotten)


def browser_piece(payload: dict, time_s: float) -> dict:
    """A progress piece as a page receives it: the trainer's fields, text made as the stored rollout shows it."""
    return {"rollout_key": storable_text(str(payload.get("rollout_key", ""))), "step": payload.get("step"),
            "problem_id": storable_text(str(payload.get("problem_id", ""))), "turn": payload.get("turn"),
            "offset": int(payload.get("offset") or 0), "text": storable_text(str(payload.get("text", ""))),
            "tokens": int(payload.get("tokens") or 0), "is_finished": bool(payload.get("is_finished")),
            "time": time_s}


@dataclass
class _Answer:
    text: str = ""
    is_lean_sent: bool = False


def closed_lean_block(text: str) -> str | None:
    """The code of the answer's last ```` ```lean4 ```` block once its fence has closed, else None."""
    start = text.rfind(LEAN4_OPEN)
    if start < 0:
        return None
    body_start = text.find("\n", start)
    if body_start < 0:
        return None
    end = text.find(FENCE, body_start)
    return None if end < 0 else text[body_start + 1:end].rstrip("\n")


class ProgressForwarder:
    """Pub/sub → Channels groups, a message per run per ``flush_every_s``."""

    def __init__(self, redis_url: str | None = None, *, flush_every_s: float = 0.25):
        self.redis = redis.Redis.from_url(redis_url or settings.REDIS_URL, socket_connect_timeout=5,
                                          socket_timeout=10, health_check_interval=30)
        self.flush_every_s = flush_every_s
        self.channel_layer = get_channel_layer()
        self._answers: dict[str, _Answer] = {}
        self._pending: dict[int, list[dict]] = {}
        self.forwarded = 0
        self.dropped = 0
        self.subscriptions = 0  # how often it has subscribed: once, and once more after each Redis hiccup

    def run_forever(self, should_stop=lambda: False) -> None:
        logger.info("forwarding rollout_progress from %s", LIVE_CHANNEL_PATTERN)
        while not should_stop():
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.psubscribe(LIVE_CHANNEL_PATTERN)
                self.subscriptions += 1
                last_flush = time.monotonic()
                while not should_stop():
                    message = pubsub.get_message(timeout=self.flush_every_s)
                    if message is not None:
                        self.hear(message["channel"], message["data"])
                    if time.monotonic() - last_flush >= self.flush_every_s:
                        self.flush()
                        last_flush = time.monotonic()
            except redis.RedisError as error:
                self.dropped += sum(len(pieces) for pieces in self._pending.values())
                self._pending.clear()
                logger.warning("Redis went away while forwarding live text (%s: %s); its pieces are dropped, "
                               "subscribing again in 1 s (stored rollouts are unaffected)", type(error).__name__, error)
                # Closed before the pause: redis-py may have reconnected it already, and nobody reads it now.
                pubsub.close()
                time.sleep(1)
            finally:
                pubsub.close()

    def hear(self, channel, data) -> None:
        """One published progress event; anything else on a live channel is ignored (it is no one's to store)."""
        channel = channel.decode() if isinstance(channel, bytes) else str(channel)
        run_id = run_id_of_live_channel(channel)
        try:
            event = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return
        if run_id is None or not isinstance(event, dict) or event.get("type") != EventType.ROLLOUT_PROGRESS:
            return
        if str(event.get("run_id")) != str(run_id) or not isinstance(event.get("payload"), dict):
            return
        piece = browser_piece(event["payload"], float(event.get("time") or time.time()))
        self._note_shape(piece)
        self._pending.setdefault(run_id, []).append(piece)

    def _note_shape(self, piece: dict) -> None:
        """Keep the answer's text, to send its Lean block's tokens once when its fence closes."""
        key = piece["rollout_key"]
        answer = self._answers.get(key)
        if answer is None:
            if len(self._answers) >= MAX_TRACKED_ANSWERS:
                self._answers.pop(next(iter(self._answers)))
            answer = self._answers[key] = _Answer()
        if piece["offset"] == len(answer.text):
            answer.text += piece["text"]
        if not answer.is_lean_sent:
            code = closed_lean_block(answer.text)
            if code is not None:
                piece["lean_lines"] = highlighted_lines(code)
                answer.is_lean_sent = True
        if piece["is_finished"]:
            self._answers.pop(key, None)

    def flush(self) -> None:
        pending, self._pending = self._pending, {}
        for run_id, pieces in pending.items():
            try:
                async_to_sync(self.channel_layer.group_send)(f"run-{run_id}", {
                    "type": "run.progress", "pieces": pieces, "sent_at": time.time()})
                self.forwarded += len(pieces)
            except Exception as error:  # noqa: BLE001 - live text is a courtesy: drop it, keep forwarding
                self.dropped += len(pieces)
                logger.warning("could not forward live text of run %s to browsers: %s", run_id, error)


def writing_now(run, stored_keys) -> list[dict]:
    """The answers of ``run`` still being written or checked, as the trainer last said them (its ``writing``
    hash in Redis), less those already stored (``stored_keys(keys)`` → the stored ones). A Redis hiccup: none."""
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        entries = client.hgetall(writing_key(str(run.pk)))
    except redis.RedisError as error:
        logger.warning("could not read run %s's answers being written: %s", run.pk, error)
        return []
    finally:
        client.close()
    now = time.time()
    answers = []
    for raw in entries.values():
        try:
            snapshot = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(snapshot, dict) or now - float(snapshot.get("time") or 0) > WRITING_EXPIRY_S:
            continue  # an answer whose rank stopped writing (a cancelled run): not being written any more
        piece = browser_piece(snapshot, float(snapshot["time"]))
        code = closed_lean_block(piece["text"])
        if code is not None:
            piece["lean_lines"] = highlighted_lines(code)
        answers.append(piece)
    stored = set(stored_keys([answer["rollout_key"] for answer in answers])) if answers else set()
    return sorted((a for a in answers if a["rollout_key"] not in stored), key=lambda a: a["rollout_key"])
