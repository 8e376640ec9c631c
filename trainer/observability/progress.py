"""Progress of long terminal work on standard error, with one library (tqdm) everywhere.

A run's progress (``run``, ``sft``, the warm start) is read from its own events (``ProgressSink`` passes
each one on untouched), so the driver needs no printing of its own: a bar on a terminal; where standard
error is a file or a Ray job's log, one line per step instead of a bar redrawn with carriage returns.
Work counted in items rather than steps (``score``'s answers, ``eval``'s samples, a promptset import's
bytes) uses ``progress_bar``: a bar on a terminal, nothing in a log.
"""

from __future__ import annotations

import sys

from trainer.observability.events import EventSink, EventType, TrainerEvent

HEADLINE_METRICS = ("reward/mean", "sft_loss", "lean/accuracy")


def is_terminal(stream=None) -> bool:
    stream = stream or sys.stderr
    return hasattr(stream, "isatty") and stream.isatty()


def progress_bar(*, disable: bool = False, **options):
    """A tqdm bar on standard error; where that is not a terminal, or with ``disable``, it draws nothing
    (callers that want a log of their progress print lines)."""
    from tqdm import tqdm

    return tqdm(file=sys.stderr, dynamic_ncols=True, disable=disable or not is_terminal(), **options)


class ProgressSink:
    """Shows a run's steps from its events, then hands each event to the run's own sink."""

    def __init__(self, inner: EventSink, description: str):
        self.inner = inner
        self.description = description
        self.bar = None
        self.total: int | None = None

    def write(self, event: TrainerEvent) -> None:
        self.inner.write(event)
        payload = event.payload
        if event.type == EventType.RUN_STARTED:
            self.total = payload.get("total_steps") or payload.get("config", {}).get("schedule", {}).get("total_steps")
            if payload.get("compute_dtype"):
                print(f"{self.description}: {payload['compute_dtype']['sentence']}", file=sys.stderr)
            self.bar = progress_bar(total=self.total, initial=payload.get("step") or 0, desc=self.description,
                                    unit="step")
        elif event.type == EventType.METRICS and self.bar is not None:
            step = int(payload["step"])
            values = payload.get("values", {})
            headline = " · ".join(f"{name} {values[name]:.3g}" for name in HEADLINE_METRICS
                                  if isinstance(values.get(name), (int, float)))
            self.bar.update(step - self.bar.n)
            self.bar.set_postfix_str(headline, refresh=True)
            if self.bar.disable:
                self.bar.write(f"{self.description}: step {step}/{self.total or '?'} {headline}".rstrip(),
                               file=sys.stderr)
        elif event.type == EventType.EVALUATION and self.bar is not None:
            values = payload.get("values", {})
            shown = ", ".join(f"{key} {value:.3g}" for key, value in sorted(values.items())
                              if key.startswith("pass@") and isinstance(value, (int, float)))
            self.bar.write(f"{self.description}: evaluation at step {payload['step']}: {shown}", file=sys.stderr)
        elif event.type == EventType.RUN_FINISHED and self.bar is not None:
            self.bar.close()
            reason = f": {payload['reason']}" if payload.get("reason") else ""
            print(f"{self.description}: {payload.get('status')} at step {payload.get('step')}{reason}",
                  file=sys.stderr)


def show_progress(publisher, description: str) -> None:
    publisher.sink = ProgressSink(publisher.sink, description)
