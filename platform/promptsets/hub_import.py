"""Promptsets from the Hugging Face Hub: a dataset (name, config, split, revision) or a local dataset
folder, streamed into a staged JSON Lines file that then goes through the same checks as an upload.

``datasets`` reads the source: a Hub name is streamed (no full download, no cache of the whole
dataset), a folder in the Hub's layout (``data/*.parquet`` or a ``README.md`` with ``configs``) is
read file by file (Parquet row group by row group), and a folder written by ``Dataset.save_to_disk`` is
memory-mapped. Rows are written as they arrive, so memory holds one batch (and one Parquet row group)
whatever the dataset's size. ``stage_dataset`` reads in a child process under the upload check's
memory ceiling (``isolated_check``): the process that asked never holds ``datasets`` (about 120 MB
once imported, pandas and pyarrow with it), Arrow's buffers or what a hostile dataset makes the
reader allocate.

A local folder is a path on the server: ``allowed_folder`` lets one through only when it lies, once
resolved (``..`` and symlinks followed), under one of the roots the operator allowed
(``PROMPTSET_IMPORT_ROOTS``), and every file in it does too. A Hub name is always read from the Hub,
never from a server folder that happens to bear the same relative path.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from promptsets.isolated_check import default_memory_ceiling_bytes, limit_memory, ran_out_of_memory, say, start_child

# Rows held as Python objects and as JSON at once, and how often progress is said (as the check does).
# The batch is most of what the child holds beyond its imports: 2,000 rows of a promptset made its peak
# 166 MB, 500 rows 155 MB.
BATCH_ROWS = 500
# What Dataset.save_to_disk and DatasetDict.save_to_disk leave at the folder's top.
SAVE_TO_DISK_MARKERS = ("dataset_dict.json", "state.json")
ROOTS_SETTING = "PROMPTSET_IMPORT_ROOTS"
# datasets' own rule for split names (datasets.splits._split_re), so a bad one is refused before a worker starts.
SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
CONFIG_NAME = re.compile(r"^\w[\w.+-]{0,99}$")
REVISION = re.compile(r"^\w[\w./+-]{0,199}$")


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
        if self.name:
            _check_dataset_name(self.name)
        if not SPLIT_NAME.match(self.split):
            raise HubSourceError(f"split {self.split!r} is not a split name: letters, digits and _ (e.g. train, test)")
        if self.config is not None and not CONFIG_NAME.match(self.config):
            raise HubSourceError(f"config {self.config!r} is not a config name: up to 100 letters, digits, _ . + -")
        if self.revision is not None and (not REVISION.match(self.revision) or ".." in self.revision):
            raise HubSourceError(f"revision {self.revision!r} is not a branch, tag or commit: letters, digits, _ . / + -")

    @classmethod
    def from_fields(cls, *, dataset: str | None, folder: str | None, config: str | None, split: str,
                    revision: str | None) -> HubSource:
        """From what a person typed (the form, the API, the command line): spaces around a value dropped,
        an empty config or revision meaning the default. HubSourceError says what is wrong."""
        return cls(name=(dataset or "").strip(), path=(folder or "").strip(), config=(config or "").strip() or None,
                   split=split.strip(), revision=(revision or "").strip() or None)

    def describe(self) -> str:
        where = self.name or self.path
        parts = [where] + ([f"config {self.config}"] if self.config else []) + [f"split {self.split}"]
        return ", ".join(parts + ([f"revision {self.revision}"] if self.revision else []))

    def as_dict(self) -> dict:
        return asdict(self)


def _check_dataset_name(name: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError as error:
        raise HubSourceError(f"{name!r} is not a dataset name: {error}") from None
    if name.count("/") != 1:
        raise HubSourceError(f"{name!r} is not a dataset name: give it as owner/name, e.g. AI-MO/NuminaMath-LEAN")


def allowed_folder(path: str, roots: Sequence[str | Path]) -> Path:
    """``path`` resolved, if it is a folder under one of ``roots`` and holds nothing that leads outside them."""
    if not roots:
        raise HubSourceError(f"importing from a folder on the server is off: the operator lists the folders it may "
                             f"read in the {ROOTS_SETTING} setting, which is empty")
    resolved_roots = [Path(root).resolve() for root in roots]
    folder = Path(path).expanduser()
    if not folder.is_absolute():
        raise HubSourceError(f"{path!r}: give the folder's absolute path, under {_listed(resolved_roots)}")
    folder = folder.resolve()

    def inside(candidate: Path) -> bool:
        return any(candidate == root or candidate.is_relative_to(root) for root in resolved_roots)

    if not inside(folder):
        raise HubSourceError(f"{path!r} is not under a folder the server may read ({ROOTS_SETTING}: "
                             f"{_listed(resolved_roots)})")
    if not folder.is_dir():
        raise HubSourceError(f"{path!r}: no such folder")
    # A symlink inside the folder must not reach outside the roots either.
    for parent, folders, files in os.walk(folder):
        for entry in (*folders, *files):
            if not inside((Path(parent) / entry).resolve()):
                raise HubSourceError(f"{Path(parent) / entry} leads outside the folders the server may read "
                                     f"({ROOTS_SETTING}); copy the files in instead of linking them")
    return folder


def _listed(roots: Sequence[Path]) -> str:
    return ", ".join(str(root) for root in roots)


def dataset_rows(source: HubSource, batch_rows: int = BATCH_ROWS) -> Iterator[dict]:
    """The rows of the source's split, one dict each, in order; HubSourceError says why not."""
    try:
        yield from _rows(source, batch_rows)
    except (HubSourceError, MemoryError, ImportError):
        raise  # an ImportError is the reader out of memory (a library that cannot be mapped), not the dataset's fault
    except FileNotFoundError as error:
        raise HubSourceError(f"{source.describe()}: not found ({error}); check the name, or that the folder "
                             "holds a dataset") from None
    except ValueError as error:  # datasets' own words for a bad config or split, or pyarrow's for a bad file
        raise HubSourceError(f"{source.describe()}: {error}") from None
    except Exception as error:  # noqa: BLE001 - the Hub unreachable, a gated dataset, a shard that breaks off, …
        raise HubSourceError(f"{source.describe()}: cannot be read ({type(error).__name__}: {error})") from None


def _rows(source: HubSource, batch_rows: int) -> Iterator[dict]:
    import datasets

    if source.path and any((Path(source.path) / marker).is_file() for marker in SAVE_TO_DISK_MARKERS):
        loaded = datasets.load_from_disk(source.path)
        if isinstance(loaded, datasets.DatasetDict):
            if source.split not in loaded:
                raise HubSourceError(f"{source.path} has no split {source.split!r}; it has {', '.join(loaded)}")
            loaded = loaded[source.split]
        rows = loaded.with_format("arrow")
    else:
        # "hf://datasets/" makes datasets go to the Hub even where a folder of that relative path exists.
        where = source.path or f"hf://datasets/{source.name}"
        # Where torch is installed, a streamed dataset keeps its epoch in torch's shared memory (for
        # DataLoader workers): that imports all of torch, about 190 MB and a second of CPU, to read rows.
        # (reshard and with_format each make a new streamed dataset, so they too must not see torch.)
        torch_available, datasets.config.TORCH_AVAILABLE = datasets.config.TORCH_AVAILABLE, False
        try:
            rows = datasets.load_dataset(where, source.config, split=source.split, revision=source.revision,
                                         streaming=True)
            # A Parquet shard is otherwise one scan that Arrow's threads decode ahead of the rows written,
            # held back only at 1 GiB: the whole shard in memory (all 31 MB of a 100,000-row promptset
            # within the first two batches). A shard per row group holds one row group at a time.
            rows = rows.reshard().with_format("arrow")
        finally:
            datasets.config.TORCH_AVAILABLE = torch_available
    # A batch at a time, as Arrow: Arrow makes a batch's rows at once, where datasets' Python format
    # makes columns, then rows again (0.43 s against 0.17 s for 100,000 rows), and row by row it
    # slices and formats a table per row (five times slower still).
    for batch in rows.iter(batch_size=batch_rows):
        yield from batch.to_pylist()


def stage_dataset(source: HubSource, destination: Path, *, on_progress: Callable[[int], None] | None = None,
                  memory_ceiling_bytes: int | None = None, batch_rows: int = BATCH_ROWS) -> int:
    """Write the source's rows to ``destination`` as JSON Lines, in a child process; returns the number of rows.

    ``on_progress(rows)`` follows the child, once per ``batch_rows`` rows and at the end; HubSourceError
    says why the source cannot be read.
    """
    ceiling = memory_ceiling_bytes or default_memory_ceiling_bytes()
    child = start_child("promptsets.hub_import", json.dumps(source.as_dict()), str(destination), str(ceiling),
                        str(batch_rows))
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
    if ran_out_of_memory(errors, child.returncode):
        raise HubSourceError(f"{source.describe()}: reading it needed more than {ceiling // 2**20:,} MB of memory, "
                             "the limit per upload: split it, or write it with smaller Parquet row groups")
    last = errors.strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
    raise HubSourceError(f"{source.describe()}: cannot be read ({last[0][:300]})")


def _write_rows(source: HubSource, destination: Path, batch_rows: int) -> None:
    """The child's side of stage_dataset: rows to ``destination``, progress and outcome as JSON lines on stdout."""
    count = 0
    partial = destination.with_name(destination.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            batch = []
            for row in dataset_rows(source, batch_rows):
                batch.append(json.dumps(row, ensure_ascii=False, default=str))
                count += 1
                if len(batch) >= batch_rows:
                    out.write("\n".join(batch) + "\n")
                    batch = []
                    say({"rows": count})
            if batch:
                out.write("\n".join(batch) + "\n")
        partial.replace(destination)
    except HubSourceError as error:
        say({"error": str(error)})
    else:
        say({"rows": count, "done": True})
    finally:
        partial.unlink(missing_ok=True)  # whatever ended the child early (gone once replaced)


if __name__ == "__main__":
    source_json, destination, ceiling, batch_rows = sys.argv[1:5]
    limit_memory(int(ceiling))
    _write_rows(HubSource(**json.loads(source_json)), Path(destination), int(batch_rows))
