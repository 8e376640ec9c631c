"""Writing a step's per-token records, and opening one rollout's tokens with 100,000 rollouts stored (issue 35).

Each figure is a ratio to baselines measured or computed in the same run:

- **writing** ``--answers`` answers of ``--tokens`` tokens (the issue's size: 2,048 × 2,048), through the run's own
  background writer (``trainer.observability.token_records.RecordsWriter``: Parquet, zstd, float16 entropy and loss weight),
  seconds and bytes, against
  (a) the plainest dump of the same figures, every column as raw little-endian arrays (``ndarray.tofile``: no
      texts, no compression), and
  (b) the step's own learner time: the step-time model's h100x8 prediction (trainer/step_time/, what
      ``python -m trainer step-time --preset h100x8`` prints), whose learner rate is built on the utilisation the
      GPU check measured on an H200 (deploy/gpu_check.py; docs/operations/gpu-checks). A prediction, not a
      measurement: no GPU ran here. Given for this benchmark's own tokens (2,048 × 2,048 through the model's
      learner) and for a whole h100x8 step (2,048 answers of the model's mean length), with the share of the whole
      step the write would have cost had it stayed on the step's path. It is off the path now: what the step
      itself still pays is handing the records to the writer (``submit``), printed too.
- **opening** one rollout's tokens (GET /api/proofs/attempts/<id>/tokens through Django's test client: permission,
  the row's look-up, one row group of its step's file, JSON) with ``--stored-rollouts`` rollouts stored, rows in a
  real PostgreSQL (an embedded one of its own, seeded as benchmarks/viewer_page_latency.py seeds it) and files in
  the run's artifacts, against today's rollout page (GET /proofs/<id>/, the HTML the tokens are drawn into) of the
  same rollout in the same process. Median and p95 of ``--requests``; also the bytes each sends.

Disk: 100,000 rollouts × 2,048 tokens would be about 3.3 GB of records on top of the database, on a machine shared
with others with about 20 GB free; so the opened rollout's step is the full-size step written above (2,048 × ``--tokens``,
the file one request reads a row group of), and the other stored steps hold ``--stored-tokens`` tokens a rollout
(256 by default). Opening a rollout reads only its own step's file, so the other steps' sizes change the disk
taken, not the request's work. The output says so.

The data are synthetic: token ids drawn Zipf-like over SmolLM2's vocabulary (its tokenizer decodes their texts),
log-probabilities and entropies from plausible distributions; float columns of real runs compress somewhat better
than random ones, so the bytes are an upper bound. This machine's CPU writes; a GPU node's host CPU would differ.

Rerun (the issue's size, the stored steps smaller as above: about 1.5 minutes, 1 GB of disk and 1 GB of memory on
2 cores):
    .venv/bin/python benchmarks/token_records.py
Small (a minute):
    .venv/bin/python benchmarks/token_records.py --answers 64 --tokens 256 --stored-rollouts 640 --requests 10
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

import viewer_stack  # first: it puts the repository and platform/ on the path
from viewer_page_latency import p95, time_view

from trainer.observability import token_records

H100X8_ANSWERS = 2048


def synthetic_records(keys: list[str], tokens: int, seed: int, vocabulary: int) -> list:
    import numpy as np

    rng = np.random.default_rng(seed)
    records = []
    for key in keys:
        ids = np.minimum(rng.zipf(1.3, tokens), vocabulary - 1).astype(np.int32)
        learner = -rng.exponential(0.6, tokens).astype(np.float32)
        engine = (learner + rng.normal(0, 0.02, tokens)).astype(np.float32)
        flags = np.where(rng.random(tokens) < 0.02, token_records.IS_CLIPPED_HIGH, 0).astype(np.uint8)
        records.append(token_records.TokenRecord(
            rollout_key=key, advantage=float(rng.normal(0, 0.4)), token_ids=ids, engine_logprobs=engine,
            learner_logprobs=learner, entropies=rng.gamma(2.0, 0.5, tokens).astype(np.float32),
            loss_weights=np.ones(tokens, np.float32), flags=flags))
    return records


def raw_dump(records: list, folder: Path) -> int:
    """Baseline (a): every figure as one raw array file; returns its bytes."""
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


def predicted_learner_seconds(answers: int, tokens: int) -> dict:
    """Baseline (b), the step-time model's h100x8 prediction (η = 0, the release's synchronous loop)."""
    from trainer.config import RunConfig
    from trainer.step_time.inputs import layout_for, preset_inputs
    from trainer.step_time.simulation import learner_work, simulate

    config = RunConfig.from_preset("h100x8")
    inputs = preset_inputs(config)
    layout, _ = layout_for(config, 0)
    rate = inputs.learner_tokens_per_s_per_device * layout.learner_devices
    simulated = simulate(inputs, 0, layout, steps=20, seed=0)
    return {
        "this_batch_s": inputs.learner_fixed_s + learner_work(inputs, [tokens] * answers) / rate,
        "step_learner_s": statistics.fmean(batch.learning[1] - batch.learning[0] for batch in simulated.batches),
        "step_s": simulated.step_time_s,
        "mean_answer_tokens": inputs.answer_tokens.mean_tokens,
        "utilisation_source": inputs.sources.get("learner_tokens_per_s_per_device", ""),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=2048, help="answers in the written step")
    parser.add_argument("--tokens", type=int, default=2048, help="tokens an answer in the written step")
    parser.add_argument("--stored-rollouts", type=int, default=100_000)
    parser.add_argument("--stored-tokens", type=int, default=256,
                        help="tokens a rollout in the stored steps other than the opened one (disk: see the docstring)")
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    if args.stored_rollouts < args.answers:
        parser.error("--stored-rollouts must hold at least the written step's --answers")

    os.environ.update(DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="testserver")  # DEBUG would record every query
    services, root = viewer_stack.start_services(with_redis=False)
    try:
        viewer_stack.set_up_django()
        from django.db import connection
        from django.test import Client

        from proofs.models import ProofAttempt
        from trainer.learning.models import smollm2_tokenizer

        owner, version = viewer_stack.make_owner_and_version()
        run = viewer_stack.make_run(owner, version, "records", state="succeeded")
        started = time.perf_counter()
        viewer_stack.seed_attempts(run, args.stored_rollouts, per_step=args.answers)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        print(f"seeded {args.stored_rollouts:,} rollouts in PostgreSQL in {time.perf_counter() - started:.0f} s")

        tokenizer = smollm2_tokenizer()
        texts = token_records.TokenTexts(tokenizer)
        texts(list(range(len(tokenizer))))  # the vocabulary decoded once, as a long run has it
        keys_by_step: dict[int, list[str]] = {}
        for step, key in ProofAttempt.objects.filter(run=run).order_by("pk").values_list("step", "rollout_key"):
            keys_by_step.setdefault(step, []).append(key)
        steps = sorted(keys_by_step)
        opened_step = steps[len(steps) // 2]
        output = run.artifacts_dir
        token_records.write_step_records(root / "warm", 1, 1, synthetic_records(["w0", "w1"], 8, 0, len(tokenizer)),
                                         texts)  # pyarrow's import and set-up

        # --- writing one step, through the run's background writer ---------------------------------------------
        records = synthetic_records(keys_by_step[opened_step][: args.answers], args.tokens, opened_step, len(tokenizer))
        writer = token_records.RecordsWriter(output, 1, None, texts)
        started = time.perf_counter()
        writer.submit(opened_step, records)
        submit_s = time.perf_counter() - started
        writer.wait()
        write_s = time.perf_counter() - started
        writer.close()
        assert not writer.take_failures()
        file_bytes = token_records.records_path(output, opened_step, 1).stat().st_size
        started = time.perf_counter()
        raw_bytes = raw_dump(records, root / "raw")
        raw_s = time.perf_counter() - started
        shutil.rmtree(root / "raw")
        del records
        step_tokens = args.answers * args.tokens
        model = predicted_learner_seconds(args.answers, args.tokens)
        h100x8_tokens = H100X8_ANSWERS * model["mean_answer_tokens"]
        h100x8_write_s = write_s / step_tokens * h100x8_tokens
        print(f"write one step: {args.answers:,} answers × {args.tokens:,} tokens = {step_tokens:,} tokens")
        print(f"  token records (Parquet, background writer): {write_s:8.2f} s  {file_bytes / 1e6:9.1f} MB  "
              f"{file_bytes / step_tokens:5.2f} B/token")
        print(f"  (a) raw arrays:                           {raw_s:8.2f} s  {raw_bytes / 1e6:9.1f} MB  "
              f"{raw_bytes / step_tokens:5.2f} B/token")
        print(f"      ratio to (a): {write_s / raw_s:.2f}× the time, {file_bytes / raw_bytes:.2f}× the bytes")
        print(f"  (b) the h100x8 learner time the step-time model predicts (no GPU ran here): its rate, "
              f"{model['utilisation_source'].split(' before')[0]}, is built on the utilisation the GPU check measured "
              "on an H200 (deploy/gpu_check.py)")
        print(f"      these {step_tokens:,} tokens: {model['this_batch_s']:8.1f} s; the write is "
              f"{write_s / model['this_batch_s']:.3f}× that")
        print(f"      a whole h100x8 step ({H100X8_ANSWERS:,} answers of {model['mean_answer_tokens']:,.0f} tokens on "
              f"average, {h100x8_tokens / 1e6:.1f} M tokens): learner {model['step_learner_s']:.0f} s, step "
              f"{model['step_s']:.0f} s; its write at this rate {h100x8_write_s:.0f} s, "
              f"{h100x8_tokens * file_bytes / step_tokens / 1e9:.2f} GB: {h100x8_write_s / model['step_learner_s']:.3f}× "
              f"the learner time")
        print(f"      on the step's path it would have cost {h100x8_write_s / (model['step_s'] + h100x8_write_s):.1%} "
              f"of the step; off it, the step pays the hand-over: {submit_s * 1000:.1f} ms "
              f"({submit_s / (model['step_s']):.1e} of the step)")

        # --- the other stored steps, smaller (disk) ------------------------------------------------------------
        started = time.perf_counter()
        for step in steps:
            if step != opened_step:
                token_records.write_step_records(output, step, 1, synthetic_records(
                    keys_by_step[step], args.stored_tokens, step, len(tokenizer)), texts)
        stored_bytes = sum(path.stat().st_size for _, _, path in token_records.recorded_steps(output))
        print(f"stored: {args.stored_rollouts:,} rollouts in {len(steps)} step files, {stored_bytes / 1e9:.2f} GB "
              f"(written in {time.perf_counter() - started:.0f} s): step {opened_step}, the opened one, at "
              f"{args.tokens:,} tokens a rollout; the others at {args.stored_tokens:,} (disk: see the docstring)")

        # --- opening one rollout's tokens ----------------------------------------------------------------------
        attempt = ProofAttempt.objects.get(run=run, rollout_key=keys_by_step[opened_step][args.answers // 3])
        client = Client()
        client.force_login(owner)
        tokens_url, page_url = f"/api/proofs/attempts/{attempt.pk}/tokens", f"/proofs/{attempt.pk}/"
        body = client.get(tokens_url).json()
        assert body["state"] == "recorded" and len(body["tokens"]["token_ids"]) == args.tokens, body["state"]
        tokens_ms = time_view(client, tokens_url, args.requests)
        page_ms = time_view(client, page_url, args.requests)
        tokens_bytes, page_bytes = len(client.get(tokens_url).content), len(client.get(page_url).content)
        print(f"open one rollout's tokens ({args.tokens:,}) with {args.stored_rollouts:,} rollouts stored "
              f"(PostgreSQL rows, Parquet files), {args.requests} requests each:")
        print(f"  GET {tokens_url:32} median {statistics.median(tokens_ms):7.1f} ms  p95 {p95(tokens_ms):7.1f} ms  "
              f"{tokens_bytes / 1e3:8.1f} kB")
        print(f"  today's rollout page, GET {page_url:10} median {statistics.median(page_ms):7.1f} ms  "
              f"p95 {p95(page_ms):7.1f} ms  {page_bytes / 1e3:8.1f} kB")
        print(f"  ratio to the page: {statistics.median(tokens_ms) / statistics.median(page_ms):.2f}× at the median, "
              f"{p95(tokens_ms) / p95(page_ms):.2f}× at p95, {tokens_bytes / page_bytes:.2f}× the bytes")
        print("rerun: .venv/bin/python benchmarks/token_records.py --answers "
              f"{args.answers} --tokens {args.tokens} --stored-rollouts {args.stored_rollouts} "
              f"--stored-tokens {args.stored_tokens} --requests {args.requests}")
        return 0
    finally:
        from django.db import connections

        connections.close_all()
        for service in reversed(services):
            service.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
