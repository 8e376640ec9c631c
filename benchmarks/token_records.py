"""Writing a step's per-token records, and opening one rollout's tokens among many stored (trainer/token_records.py).

Two figures, each as a ratio to a baseline measured in the same process on the same data:

- **writing** ``--answers`` answers of ``--tokens`` tokens each (the issue's size: 2,048 × 2,048): seconds and bytes
  of ``write_step_records`` (Parquet, zstd, float16 entropy and loss weight), against the plainest dump of the same
  figures, every column as raw little-endian arrays (``ndarray.tofile``: float32 log-probs, entropy and weight,
  int32 ids, uint8 flags; no texts, no compression). The ratio says what the columnar file costs over writing the
  numbers at all; the bytes a token say whether an h100x8 step (2,048 × up to 24,576 tokens) fits on disk.
- **opening** one rollout's tokens (``read_rollout``, what GET /api/proofs/attempts/<id>/tokens does) with
  ``--stored-rollouts`` stored (the issue's: 100,000, as whole steps of ``--answers``), against decoding that
  rollout's whole step file (what a reader without row groups and statistics would do). Median of ``--repeats``.

The data are synthetic: token ids drawn Zipf-like over SmolLM2's vocabulary (its tokenizer decodes their texts),
log-probabilities and entropies from plausible distributions; float columns of real runs compress somewhat better
than random ones, so the bytes are an upper bound.

Rerun (full size; needs about 60 GB of disk for the stored steps and several minutes a step):
    .venv/bin/python benchmarks/token_records.py --answers 2048 --tokens 2048 --stored-rollouts 100000
Small (seconds):
    .venv/bin/python benchmarks/token_records.py --answers 64 --tokens 256 --stored-rollouts 640
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from timing import median_seconds  # noqa: E402 - the benchmarks folder is the script's own, on the path already

from trainer import token_records  # noqa: E402 - after the repository is put on the path


def synthetic_records(answers: int, tokens: int, step: int, seed: int, vocabulary: int) -> list:
    import numpy as np

    rng = np.random.default_rng(seed)
    records = []
    for index in range(answers):
        ids = np.minimum(rng.zipf(1.3, tokens), vocabulary - 1).astype(np.int32)
        learner = -rng.exponential(0.6, tokens).astype(np.float32)
        engine = (learner + rng.normal(0, 0.02, tokens)).astype(np.float32)
        flags = np.where(rng.random(tokens) < 0.02, token_records.IS_CLIPPED_HIGH, 0).astype(np.uint8)
        records.append(token_records.TokenRecord(
            rollout_key=f"a1-s{step}-p{index // 8}-r{index % 8}", advantage=float(rng.normal(0, 0.4)),
            token_ids=ids, engine_logprobs=engine, learner_logprobs=learner,
            entropies=rng.gamma(2.0, 0.5, tokens).astype(np.float32), loss_weights=np.ones(tokens, np.float32),
            flags=flags))
    return records


def raw_dump(records: list, folder: Path) -> int:
    """The baseline: every figure as one raw array file; returns its bytes."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    columns = {
        "token_ids": (np.int32, lambda r: r.token_ids), "engine": (np.float32, lambda r: r.engine_logprobs),
        "learner": (np.float32, lambda r: r.learner_logprobs), "entropy": (np.float32, lambda r: r.entropies),
        "weight": (np.float32, lambda r: r.loss_weights), "flags": (np.uint8, lambda r: r.flags),
    }
    total = 0
    for name, (dtype, values_of) in columns.items():
        path = folder / f"{name}.bin"
        np.concatenate([np.asarray(values_of(r), dtype=dtype) for r in records]).tofile(path)
        total += path.stat().st_size
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=2048, help="answers a step")
    parser.add_argument("--tokens", type=int, default=2048, help="tokens an answer")
    parser.add_argument("--stored-rollouts", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--folder", default=None, help="where to write (default: a temporary folder, removed)")
    args = parser.parse_args()

    from trainer.models import smollm2_tokenizer

    tokenizer = smollm2_tokenizer()
    texts = token_records.TokenTexts(tokenizer)
    root = Path(args.folder or tempfile.mkdtemp(prefix="token-records-bench-"))
    try:
        records = synthetic_records(args.answers, args.tokens, 1, 0, len(tokenizer))
        texts(list(range(len(tokenizer))))  # the vocabulary decoded once, as a long run has it
        token_records.write_step_records(root / "warm", 1, 1, records[:2], texts)  # pyarrow's import and set-up
        started = time.perf_counter()
        path = token_records.write_step_records(root, 1, 1, records, texts)
        write_s = time.perf_counter() - started
        started = time.perf_counter()
        raw_bytes = raw_dump(records, root / "raw")
        raw_s = time.perf_counter() - started
        file_bytes = path.stat().st_size
        step_tokens = args.answers * args.tokens
        print(f"write one step: {args.answers:,} answers × {args.tokens:,} tokens = {step_tokens:,} tokens")
        print(f"  token records (Parquet): {write_s:8.2f} s  {file_bytes / 1e6:10.1f} MB  "
              f"{file_bytes / step_tokens:5.2f} B/token")
        print(f"  baseline (raw arrays):   {raw_s:8.2f} s  {raw_bytes / 1e6:10.1f} MB  {raw_bytes / step_tokens:5.2f} B/token")
        print(f"  ratio to the baseline:   {write_s / raw_s:8.2f} × time  {file_bytes / raw_bytes:8.2f} × bytes")
        h100x8_tokens = 2048 * 24_576
        print(f"  an h100x8 step at its limit ({h100x8_tokens:,} tokens) at this rate: "
              f"{file_bytes / step_tokens * h100x8_tokens / 1e9:.1f} GB, {write_s / step_tokens * h100x8_tokens:.0f} s")
        del records

        steps = max(1, -(-args.stored_rollouts // args.answers))
        for step in range(2, steps + 1):
            token_records.write_step_records(root, step, 1, synthetic_records(args.answers, args.tokens, step, step,
                                                                              len(tokenizer)), texts)
        stored = steps * args.answers
        middle = steps // 2 + 1
        key = f"a1-s{middle}-p{args.answers // 16}-r3"
        assert token_records.read_rollout(root, middle, 1, key) is not None, key
        one = median_seconds(lambda: token_records.read_rollout(root, middle, 1, key), args.repeats)

        def whole_step():
            import pyarrow.parquet as pq

            table = pq.read_table(token_records.records_path(root, middle, 1))
            import pyarrow.compute as pc

            return table.filter(pc.equal(table.column("rollout_key"), key)).to_pydict()

        baseline = median_seconds(whole_step, args.repeats)
        print(f"open one rollout's tokens with {stored:,} rollouts stored ({steps} step files):")
        print(f"  read_rollout:                     {one * 1000:8.1f} ms")
        print(f"  baseline (decode its whole step): {baseline * 1000:8.1f} ms")
        print(f"  ratio to the baseline:            {one / baseline:8.3f}")
        print("rerun: .venv/bin/python benchmarks/token_records.py "
              f"--answers {args.answers} --tokens {args.tokens} --stored-rollouts {args.stored_rollouts}")
        return 0
    finally:
        if args.folder is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
