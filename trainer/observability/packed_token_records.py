"""A data-parallel rank's token records as flat arrays, to send to rank 0 (trainer/loop/distributed.py gathers them).

Pickling a step's records object by object (an h100x8 step is tens of millions of tokens) costs more than the
numbers themselves; here each figure is concatenated over a rank's records into one byte buffer of columns, with the
keys, advantages and lengths as small side data, and ``unpack_records`` gives every value back bit for bit
(tests/learning/test_data_parallel_token_records_reach_rank_zero_as_arrays_bit_for_bit.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainer.observability.token_records import TokenRecord

# (field, wire dtype), widest first so each column starts aligned in the packed buffer. Each dtype holds what the
# learner makes exactly: ids are Python ints, the engine's log-probs Python floats (float64), the rest float32/uint8.
PACKED_COLUMNS = (("token_ids", "<i8"), ("engine_logprobs", "<f8"), ("learner_logprobs", "<f4"),
                  ("entropies", "<f4"), ("loss_weights", "<f4"), ("flags", "u1"))


@dataclass
class PackedRecords:
    """A rank's records as one flat byte buffer of columns (each concatenated over the records, in
    ``PACKED_COLUMNS``' order) and small side data: keys, advantages, lengths, which had engine log-probs."""

    rollout_keys: list[str]
    advantages: Any  # (R,) float64 numpy array
    lengths: Any  # (R,) int64: tokens of each record; offsets are their cumulative sums
    has_engine_logprobs: Any  # (R,) bool
    buffer: Any  # (bytes,) uint8

    def side_data(self) -> tuple:
        return self.rollout_keys, self.advantages, self.lengths, self.has_engine_logprobs


def pack_records(records: Sequence[TokenRecord]) -> PackedRecords:
    """``records`` as flat arrays; ``unpack_records`` gives them back value for value."""
    import numpy as np

    lengths = np.array([len(record.token_ids) for record in records], dtype=np.int64)
    has_engine = np.array([record.engine_logprobs is not None for record in records], dtype=bool)
    columns = []
    for name, dtype in PACKED_COLUMNS:
        parts = [np.asarray(getattr(record, name), dtype=dtype) if getattr(record, name) is not None
                 else np.full(length, np.nan, dtype=dtype)
                 for record, length in zip(records, lengths)]
        columns.append(np.concatenate(parts) if parts else np.empty(0, dtype=dtype))
    buffer = np.concatenate([column.view(np.uint8) for column in columns]) if columns else np.empty(0, np.uint8)
    return PackedRecords([record.rollout_key for record in records],
                         np.array([record.advantage for record in records], dtype=np.float64), lengths, has_engine,
                         buffer)


def packed_size(lengths) -> int:
    """Bytes of the packed buffer of records of ``lengths`` tokens."""
    import numpy as np

    return int(np.sum(lengths)) * sum(np.dtype(dtype).itemsize for _, dtype in PACKED_COLUMNS)


def unpack_records(packed: PackedRecords) -> list[TokenRecord]:
    """The records ``pack_records`` packed: each figure a numpy array of its wire dtype."""
    import numpy as np

    tokens = int(packed.lengths.sum())
    data = np.asarray(packed.buffer, dtype=np.uint8)
    columns, start = {}, 0
    for name, dtype in PACKED_COLUMNS:
        size = tokens * np.dtype(dtype).itemsize
        columns[name] = data[start:start + size].view(dtype)
        start += size
    if start != data.size:
        raise ValueError(f"a packed buffer of {data.size} bytes for {tokens} tokens: expected {start}")
    offsets = np.concatenate([[0], np.cumsum(packed.lengths)])
    records = []
    for index, key in enumerate(packed.rollout_keys):
        span = slice(int(offsets[index]), int(offsets[index + 1]))
        values = {name: column[span].copy() for name, column in columns.items()}
        if not packed.has_engine_logprobs[index]:
            values["engine_logprobs"] = None
        records.append(TokenRecord(rollout_key=key, advantage=float(packed.advantages[index]), **values))
    return records
