"""Checkpoint downloads: a folder streamed as a zip, never read whole into memory.

Checkpoints hold gigabytes of weights, so the archive is written stored (weights do not
compress) to a buffer that is drained after every chunk.
"""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.http import Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404

from runs.models import Checkpoint
from trainer.run.checkpoint import MODEL_FOLDER

CHUNK_BYTES = 1 << 20


class CheckpointUnavailable(Exception):
    """The checkpoint's folder cannot be offered for download; the message says why."""


def checkpoint_folder(checkpoint: Checkpoint, *, model_only: bool) -> Path:
    """The folder to archive, refused unless it lies inside the platform's artifacts folder."""
    folder = Path(checkpoint.path).resolve()
    root = Path(settings.ARTIFACTS_DIR).resolve()
    if not folder.is_relative_to(root):
        raise CheckpointUnavailable(
            f"checkpoint folder {checkpoint.path!r} lies outside the platform's artifacts folder {str(root)!r}; "
            "copy it from the cluster's storage instead"
        )
    if model_only:
        folder = folder / MODEL_FOLDER
    if not folder.is_dir():
        raise CheckpointUnavailable(f"checkpoint folder {str(folder)!r} does not exist on this machine (any more)")
    return folder


def folder_size(path: str | os.PathLike) -> int | None:
    """Bytes of the files in a folder (a checkpoint's download, a run's artifacts), or None where it is not
    on this machine. Links are not followed: they are not what the folder holds."""
    if not Path(path).is_dir():
        return None
    total = 0
    for root, _folders, files in os.walk(path):
        for name in files:
            try:
                status = os.lstat(os.path.join(root, name))
            except OSError:  # removed while we walked (retention deleting a checkpoint)
                continue
            if stat.S_ISREG(status.st_mode):
                total += status.st_size
    return total


class _DrainedBuffer:
    """A write-only file whose contents are taken away as they come (zipfile streams into it)."""

    def __init__(self):
        self.chunks: list[bytes] = []

    def write(self, data) -> int:
        self.chunks.append(bytes(data))
        return len(data)

    def flush(self):
        pass

    def take(self) -> bytes:
        data, self.chunks = b"".join(self.chunks), []
        return data


def zip_stream(folder: Path) -> Iterator[bytes]:
    buffer = _DrainedBuffer()
    with zipfile.ZipFile(buffer, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            with path.open("rb") as source, archive.open(path.relative_to(folder).as_posix(), "w", force_zip64=True) as target:
                while chunk := source.read(CHUNK_BYTES):
                    target.write(chunk)
                    yield buffer.take()
            yield buffer.take()
    yield buffer.take()


def download_response(run, step: int, part: str):
    """The run's checkpoint at ``step`` as a streamed zip: ``part`` is "model" (the Hugging Face folder)
    or "checkpoint" (everything, optimizer state included). Http404 saying why when it cannot be offered;
    the page and the API both answer with this."""
    if part not in ("model", "checkpoint"):
        raise Http404(f"unknown checkpoint download {part!r}; ask for model.zip or checkpoint.zip")
    checkpoint = get_object_or_404(run.checkpoints, step=step)
    try:
        folder = checkpoint_folder(checkpoint, model_only=part == "model")
    except CheckpointUnavailable as error:
        raise Http404(str(error)) from None
    response = StreamingHttpResponse(zip_stream(folder), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="run{run.pk}-step{step:06d}-{part}.zip"'
    return response
