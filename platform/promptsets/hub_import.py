"""Promptsets from the Hugging Face Hub: a dataset (name, config, split, revision) or a local dataset
folder, streamed into a staged JSON Lines file that then goes through the same checks as an upload.

``datasets`` reads the source: a Hub name is streamed (no full download, no cache of the whole
dataset), a folder in the Hub's layout (``data/*.parquet`` or a ``README.md`` with ``configs``) is
read file by file, and a folder written by ``Dataset.save_to_disk`` is memory-mapped. Rows are written
as they arrive, so memory holds one batch whatever the dataset's size.
"""

from __future__ import annotations

import json
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


def stage_dataset(source: HubSource, destination: Path, *, on_progress: Callable[[int], None] | None = None) -> int:
    """Write the source's rows to ``destination`` as JSON Lines; returns the number of rows."""
    count = 0
    partial = destination.with_name(destination.name + ".partial")
    with partial.open("w", encoding="utf-8") as out:
        batch = []
        for row in dataset_rows(source):
            batch.append(json.dumps(row, ensure_ascii=False, default=str))
            count += 1
            if len(batch) >= BATCH_ROWS:
                out.write("\n".join(batch) + "\n")
                batch = []
                if on_progress:
                    on_progress(count)
        if batch:
            out.write("\n".join(batch) + "\n")
    partial.replace(destination)
    if on_progress:
        on_progress(count)
    return count
