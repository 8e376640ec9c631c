"""Answers while the model is still writing them: ``rollout_progress`` events, live and never stored.

A rollout's text reaches the platform twice. The stored rollout (``rollout_finished``, on the run's
durable stream) is the truth; before it, while generation is still going, pieces of the text travel
apart, on a pub/sub channel per run (``events.live_channel``), so that a person watching sees the
answer form instead of nothing for minutes. What this module defends:

- **The durable path is never delayed.** Progress goes through its own bounded queue and its own
  sender thread; when that queue is full, or Redis hiccups, progress is dropped and counted, and the
  generation thread never waits on it. It never touches ``BufferedStreamSink``.
- **Bounded.** At most ``events.progress_rollouts`` answers per rank stream at once, each at most
  once per ``events.progress_interval_s`` (its first piece as soon as it has text).
- **A piece is a true prefix.** ``offset`` counts code points; the text offered is what the engine
  decoded so far, less a trailing U+FFFD (a token that ended inside a character: the character
  completes later) and trailing whitespace (a tokenizer's clean-up may still join it to what
  follows). Pieces joined by offset are a prefix of the stored ``response``; should a decode ever
  disagree with what was already sent, that answer streams no more (the stored one still arrives).

Tested in tests/observability/test_progress_events_are_a_prefix_of_the_stored_answer.py and
tests/runs/test_progress_is_never_stored_or_numbered.py.
"""

from __future__ import annotations

import collections
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainer.observability.events import EventSink, RolloutProgress, TrainerEvent, live_channel, writing_key

REPLACEMENT_CHARACTER = "\ufffd"
WRITING_EXPIRY_S = 120  # a rollout's latest text outlives its last piece by this much, then Redis forgets it


def stable_text(decoded: str) -> str:
    """What of ``decoded`` can be shown and never change: without a trailing U+FFFD (half a character)
    or trailing whitespace (a clean-up may still remove a space before the punctuation that follows)."""
    return decoded.rstrip(REPLACEMENT_CHARACTER).rstrip()


class IncrementalDecoder:
    """The text of each growing list of token ids, decoding only the new tokens and a few before them.

    Decoding a whole 24,576-token answer takes 4 ms on a CPU (SmolLM2's tokenizer), at every piece of
    every streamed answer; this decodes ``CONTEXT`` tokens of context plus what is new, as vLLM's
    detokenizer does, and keeps the text. A tail that ends inside a character (U+FFFD) is not kept, so
    the next call decodes it again with the rest of the character. Where the context reads differently
    with the new tokens after it (a tokenizer's clean-up joining them), it decodes everything once.
    """

    CONTEXT = 8

    def __init__(self, decode: Callable[[list[int]], str]):
        self._decode = decode
        self._done: dict[object, tuple[int, str]] = {}  # key → (ids decoded, their text)

    def text(self, key: object, ids: list[int]) -> str:
        count, text = self._done.get(key, (0, ""))
        start = max(0, count - self.CONTEXT)
        context = self._decode(ids[start:count]) if count else ""
        tail = self._decode(ids[start:])
        if tail.startswith(context):
            text += tail[len(context):]
        else:
            text = self._decode(ids)
        if not text.endswith(REPLACEMENT_CHARACTER):
            self._done[key] = (len(ids), text)
        return text


@dataclass
class _Streaming:
    rollout_key: str
    step: int
    problem_id: str
    turn: str
    sent: str = ""
    sent_at: float | None = None
    is_diverged: bool = False


class LiveRollouts:
    """The progress of one ``generate`` call's answers, handed by the engine as it decodes.

    ``describe(prompt_index, sample_index)`` names an answer (rollout_key, step, problem_id, turn), or
    None for one this rank does not publish. The engine calls ``update`` at each decoding step (cheap
    unless a piece is due: ``text_so_far`` is called only then) and the caller ``finish`` when it
    receives the finished answer. Thread-safe: engines decode in a worker thread.
    """

    def __init__(self, publish: Callable[[RolloutProgress], None],
                 describe: Callable[[int, int], tuple[str, int, str, str] | None],
                 *, interval_s: float, max_rollouts: int, clock: Callable[[], float] = time.monotonic):
        self._publish = publish
        self._describe = describe
        self.interval_s = interval_s
        self.max_rollouts = max_rollouts
        self._clock = clock
        self._streaming: dict[tuple[int, int], _Streaming] = {}
        self._done: set[tuple[int, int]] = set()
        self._lock = threading.Lock()

    def update(self, prompt_index: int, sample_index: int, tokens: int, text_so_far: Callable[[], str]) -> None:
        where = (prompt_index, sample_index)
        with self._lock:
            state = self._streaming.get(where)
            if state is None:
                if where in self._done or len(self._streaming) >= self.max_rollouts:
                    return  # past the cap: it appears when stored; it may stream once another one ends
                described = self._describe(prompt_index, sample_index)
                if described is None:
                    self._done.add(where)
                    return
                state = self._streaming[where] = _Streaming(*described)
            now = self._clock()
            if state.is_diverged or (state.sent_at is not None and now - state.sent_at < self.interval_s):
                return
            text = stable_text(text_so_far())
            if not text.startswith(state.sent):
                state.is_diverged = True
                return
            if len(text) == len(state.sent):
                return  # nothing new yet: the first piece goes as soon as there is text
            piece = self._piece(state, text[len(state.sent):], tokens, is_finished=False)
            state.sent, state.sent_at = text, now
        self._send(piece)

    def finish(self, prompt_index: int, sample_index: int, text: str, tokens: int) -> None:
        """The answer is complete (Lean checks it next): its last piece, marked finished, if it streamed."""
        where = (prompt_index, sample_index)
        with self._lock:
            state = self._streaming.pop(where, None)
            if state is None and where not in self._done and len(self._streaming) < self.max_rollouts:
                # Ended before a piece was due (at its first token, or with no text): one piece says it all.
                described = self._describe(prompt_index, sample_index)
                state = _Streaming(*described) if described is not None else None
            self._done.add(where)
            if state is None:
                return
            rest = text[len(state.sent):] if not state.is_diverged and text.startswith(state.sent) else ""
            piece = self._piece(state, rest, tokens, is_finished=True)
        self._send(piece)

    def _piece(self, state: _Streaming, text: str, tokens: int, *, is_finished: bool) -> RolloutProgress:
        return RolloutProgress(rollout_key=state.rollout_key, step=state.step, problem_id=state.problem_id,
                               turn=state.turn, offset=len(state.sent), text=text, tokens=tokens,
                               is_finished=is_finished)

    def _send(self, piece: RolloutProgress) -> None:
        try:
            self._publish(piece)
        except Exception as error:  # noqa: BLE001 - progress is a courtesy: it never stops generation
            print(f"rollout_progress: dropped a piece of {piece.rollout_key} ({type(error).__name__}: {error})",
                  file=sys.stderr, flush=True)


class RedisLiveSink:
    """``rollout_progress`` to Redis: PUBLISH on the run's live channel, and the latest text of each answer
    in the run's ``writing`` hash (expiring), for a page that opens mid-answer.

    ``write`` never waits: it queues (at most ``max_queued`` events, the oldest dropped past that) and one
    daemon thread sends. A send that fails is dropped and counted, never retried: the stored rollout will
    say everything the lost pieces said.
    """

    def __init__(self, redis_url: str, run_id: str, *, max_queued: int = 4096, socket_timeout_s: float = 2.0):
        import redis

        self.client = redis.Redis.from_url(redis_url, socket_connect_timeout=socket_timeout_s,
                                           socket_timeout=socket_timeout_s)
        self.channel = live_channel(run_id)
        self.writing = writing_key(run_id)
        self._queue: collections.deque[TrainerEvent] = collections.deque(maxlen=max_queued)
        self._condition = threading.Condition()
        self._texts: dict[str, str] = {}  # rollout_key → text so far, for the writing hash
        self.sent = 0
        self.dropped = 0
        self._closed = False
        self._sender = threading.Thread(target=self._send_forever, name="progress-sender", daemon=True)
        self._sender.start()

    def write(self, event: TrainerEvent) -> None:
        with self._condition:
            if len(self._queue) == self._queue.maxlen:
                self.dropped += 1  # the deque drops its oldest
            self._queue.append(event)
            self._condition.notify()

    def close(self, timeout: float = 2.0) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._sender.join(timeout)

    def _send_forever(self) -> None:
        is_failing = False
        while True:
            with self._condition:
                while not self._queue and not self._closed:
                    self._condition.wait()
                if not self._queue:
                    return
                batch = list(self._queue)
                self._queue.clear()
            try:
                self._send(batch)
                self.sent += len(batch)
                is_failing = False
            except Exception as error:  # noqa: BLE001 - a Redis hiccup costs progress and nothing else
                self.dropped += len(batch)
                if not is_failing:
                    print(f"rollout_progress: Redis refused live text ({type(error).__name__}: {error}); "
                          "dropping it until Redis answers (stored rollouts are unaffected)", file=sys.stderr, flush=True)
                is_failing = True
                time.sleep(0.5)

    def _send(self, batch: list[TrainerEvent]) -> None:
        pipeline = self.client.pipeline(transaction=False)
        for event in batch:
            payload = event.payload
            key = payload["rollout_key"]
            so_far = self._texts.get(key, "")
            if len(so_far) == payload["offset"]:
                so_far += payload["text"]
            if payload.get("is_finished"):
                self._texts.pop(key, None)
            else:
                self._texts[key] = so_far
            pipeline.publish(self.channel, event.model_dump_json())
            snapshot = {**payload, "offset": 0, "text": so_far, "time": event.time}
            pipeline.hset(self.writing, key, json.dumps(snapshot))
        pipeline.expire(self.writing, WRITING_EXPIRY_S)
        pipeline.execute()


def live_sink_for(url: str, run_id: str, durable: EventSink) -> EventSink | None:
    """Where a run's progress goes beside its durable ``sink_from_url(url)``: the same stdout (printed like
    every other event), Redis pub/sub for a redis:// URL."""
    if url in ("-", "stdout", ""):
        return durable
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisLiveSink(url, run_id)
    return None


def close_live_sink(sink: EventSink | None) -> None:
    if isinstance(sink, RedisLiveSink):
        sink.close()
