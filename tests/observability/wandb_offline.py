"""Reads back what W&B wrote offline: its transaction log (``run-*.wandb``), which the wandb package
writes but no longer reads in Python. The format is LevelDB's log (32 KiB blocks of records with a
7-byte header: CRC-32, length, type) behind a 7-byte W&B header; each record is a protobuf
``wandb.proto.wandb_internal_pb2.Record``."""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path):
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1, f"{path} is not a W&B transaction log"
    position, pending = 7, b""
    while position + 7 <= len(data):
        room = BLOCK - position % BLOCK
        if room < 7:  # the block's tail is padding
            position += room
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[position:position + 7])
        chunk = data[position + 7:position + 7 + length]
        position += 7 + length
        if kind == 0 and length == 0:
            continue
        if kind == FULL:
            pending = chunk
        elif kind == FIRST:
            pending = chunk
            continue
        elif kind == MIDDLE:
            pending += chunk
            continue
        elif kind == LAST:
            pending += chunk
        record = wandb_internal_pb2.Record()
        record.ParseFromString(pending)
        yield record


def history(run_folder: Path) -> list[dict]:
    """Every row the run logged with ``run.log``, keys to decoded JSON values (``_step`` included)."""
    log_file = next(run_folder.glob("run-*.wandb"))
    rows = []
    for record in records(log_file):
        if record.WhichOneof("record_type") == "history":
            rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                         for item in record.history.item})
    return rows


def config(run_folder: Path) -> dict:
    log_file = next(run_folder.glob("run-*.wandb"))
    values = {}
    for record in records(log_file):
        kind = record.WhichOneof("record_type")
        updates = record.run.config.update if kind == "run" else record.config.update if kind == "config" else []
        for item in updates:
            values[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return values
