"""Promptsets from the Hugging Face Hub: a dataset (name, config, split, revision) or a local dataset
folder, streamed into a staged JSON Lines file that then goes through the same checks as an upload.

``datasets`` reads the source: a Hub name is streamed (no full download, no cache of the whole
dataset), a folder in the Hub's layout (``data/*.parquet`` or a ``README.md`` with ``configs``) is
read file by file, and a folder written by ``Dataset.save_to_disk`` is memory-mapped. Rows are written
as they arrive, so memory holds one batch whatever the dataset's size. ``stage_dataset`` reads in a
child process under the upload check's memory ceiling (``isolated_check``): the process that asked
never holds ``datasets`` (about 100 MB once imported), Arrow's buffers or what a hostile dataset makes
the reader allocate.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

BATCH_ROWS = 2000
# What Dataset.save_to_disk and DatasetDict.save_to_disk leave at the folder's top.
SAVE_TO_DISK_MARKERS = ("dataset_dict.json", "state.json")


class HubSourceError(ValueError):
    """The dataset cannot be read; the message says what to fix."""


@dataclass(frozen=True)
class HubSource:
    """A dataset on the Hub (``name``) or a local dataset folder (``path``), and which part of it."""

    name: str = ""
    path: str = ""
    config: str | None = None
    split: str = "train"
    revision: str | None = None

    def __post_init__(self):
        if bool(self.name) == bool(self.path):
            raise HubSourceError("give a dataset name (e.g. AI-MO/Kimina-Prover-Promptset) or a local folder, not both")

    def describe(self) -> str:
        where = self.name or self.path
        parts = [where] + ([f"config {self.config}"] if self.config else []) + [f"split {self.split}"]
        return ", ".join(parts + ([f"revision {self.revision}"] if self.revision else []))

    def as_dict(self) -> dict:
        return asdict(self)


def dataset_rows(source: HubSource) -> Iterator[dict]:
    """The rows of the source's split, one dict each, in order."""
    import datasets

    try:
        if source.path and any((Path(source.path) / marker).is_file() for marker in SAVE_TO_DISK_MARKERS):
            loaded = datasets.load_from_disk(source.path)
            if isinstance(loaded, datasets.DatasetDict):
                if source.split not in loaded:
                    raise HubSourceError(f"{source.path} has no split {source.split!r}; it has {', '.join(loaded)}")
                loaded = loaded[source.split]
            rows = loaded
        else:
            # Where torch is installed, a streamed dataset keeps its epoch in torch's shared memory (for
            # DataLoader workers): that imports all of torch, about 190 MB and a second of CPU, to read rows.
            torch_available, datasets.config.TORCH_AVAILABLE = datasets.config.TORCH_AVAILABLE, False
            try:
                rows = datasets.load_dataset(source.name or source.path, source.config, split=source.split,
                                             revision=source.revision, streaming=True)
            finally:
                datasets.config.TORCH_AVAILABLE = torch_available
    except HubSourceError:
        raise
    except FileNotFoundError as error:
        raise HubSourceError(f"{source.describe()}: not found ({error}); check the name, or that the folder "
                             "holds a dataset") from None
    except ValueError as error:  # datasets' own words for a bad config or split
        raise HubSourceError(f"{source.describe()}: {error}") from None
    except Exception as error:  # the Hub unreachable, a gated dataset, …
        raise HubSourceError(f"{source.describe()}: cannot be read ({type(error).__name__}: {error})") from None
    # A batch at a time: datasets turns Arrow into Python a batch at once, where row by row it
    # slices and formats a table per row (five times slower on a promptset).
    for batch in rows.iter(batch_size=BATCH_ROWS):
        columns = list(batch)
        for values in zip(*batch.values()):
            yield dict(zip(columns, values))


def stage_dataset(source: HubSource, destination: Path, *, on_progress: Callable[[int], None] | None = None,
                  memory_ceiling_bytes: int | None = None) -> int:
    """Write the source's rows to ``destination`` as JSON Lines, in a child process; returns the number of rows.

    ``on_progress(rows)`` follows the child; HubSourceError says why the source cannot be read.
    """
    from promptsets.isolated_check import child_environment, default_memory_ceiling_bytes

    ceiling = memory_ceiling_bytes or default_memory_ceiling_bytes()
    # The child sets its own ceiling first thing (no preexec_fn: that would fork a copy of a large parent).
    child = subprocess.Popen(
        [sys.executable, "-m", "promptsets.hub_import", json.dumps(source.as_dict()), str(destination), str(ceiling)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_environment(),
    )
    outcome: dict = {}
    for line in child.stdout:
        outcome = json.loads(line)
        if "rows" in outcome and on_progress:
            on_progress(outcome["rows"])
    errors = child.stderr.read()
    child.wait()
    if "error" in outcome:
        raise HubSourceError(outcome["error"])
    if outcome.get("done"):
        return outcome["rows"]
    out_of_memory = ("MemoryError", "Cannot allocate memory", "failed to map segment")  # the last: loading a library
    if any(words in errors for words in out_of_memory) or child.returncode in (-9, 137):
        raise HubSourceError(f"{source.describe()}: reading it needed more than {ceiling // 2**20:,} MB of memory, "
                             "the limit per upload: split it, or write it with smaller Parquet row groups")
    last = errors.strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
    raise HubSourceError(f"{source.describe()}: cannot be read ({last[0][:300]})")


def _write_rows(source: HubSource, destination: Path) -> None:
    """The child's side of stage_dataset: rows to ``destination``, progress and outcome as JSON lines on stdout."""
    count = 0
    partial = destination.with_name(destination.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            batch = []
            for row in dataset_rows(source):
                batch.append(json.dumps(row, ensure_ascii=False, default=str))
                count += 1
                if len(batch) >= BATCH_ROWS:
                    out.write("\n".join(batch) + "\n")
                    batch = []
                    _say({"rows": count})
            if batch:
                out.write("\n".join(batch) + "\n")
        partial.replace(destination)
    except HubSourceError as error:
        _say({"error": str(error)})
    else:
        _say({"rows": count, "done": True})
    finally:
        partial.unlink(missing_ok=True)  # whatever ended the child early (gone once replaced)


def _say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    source_json, destination, ceiling = sys.argv[1:4]
    resource.setrlimit(resource.RLIMIT_AS, (int(ceiling), int(ceiling)))
    _write_rows(HubSource(**json.loads(source_json)), Path(destination))
