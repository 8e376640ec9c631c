"""The synchronous loop's exact numbers, recorded before asynchronous RL existed (tests/asynchronous/data).

The answers, rewards and trained-sequence counts are the same on every x86 CPU. The losses, gradient norms
and weights are not: ATen and oneDNN pick their float32 kernels by instruction set (AVX2 or AVX512), and
those sum in another order, so the last bits differ. Those figures are therefore recorded once per compute
dtype and kernel set, in a file named by both.

``python -m tests.asynchronous.synchronous_loop`` writes the record of the kernel set it runs on (cap it with
``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` to write the AVX2 one): do that only for a change meant
to alter the synchronous loop's numbers, for every kernel set, and say why in its commit.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tempfile
from pathlib import Path

from tests.learning.conftest import FirstTokenRewardScorer, tiny_run_config
from trainer.recipe.problems import Problem

RECORD_DIR = Path(__file__).parent / "data"
STABLE_ACROSS_KERNEL_SETS = ("responses_sha256", "reward/mean", "learner/trained_sequences")


def kernel_set() -> str:
    """The instruction set ATen's CPU kernels use here: 'AVX512', 'AVX2', … (ATEN_CPU_CAPABILITY caps it)."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def record_path(kernels: str | None = None) -> Path:
    return RECORD_DIR / f"synchronous_loop.{synchronous_config().model.dtype}.{kernels or kernel_set()}.json"


def stable_part(record: dict) -> dict:
    """What no kernel set changes: the sampled answers, the rewards, how many sequences were trained."""
    return {"responses_sha256": record["responses_sha256"],
            "steps": [{name: step[name] for name in STABLE_ACROSS_KERNEL_SETS[1:]} for step in record["steps"]]}
PROBLEMS = [Problem(f"p{i}", f"theorem t{i} : ({i} : ℕ) + 1 = {i + 1} := by") for i in range(4)]


def synchronous_config(schedule: dict | None = None, **rollout):
    return tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 4, "max_response_tokens": 6, "top_k": 2, **rollout},
        optimizer={"learning_rate": 1e-3, "mini_batch_prompts": 1, "micro_batch_sequences": 2},
        schedule={"total_steps": 3, "eval_every": 0, "checkpoint_every": 0, **(schedule or {})},
    )


def run_synchronous_loop(tokenizer, config=None) -> dict:
    """Three steps of the tiny model, from seed 0; every float as ``float.hex``, the weights as a hash."""
    from trainer.learning.models import tiny_random_policy
    from trainer.loop.driver import RunStatus, TrainingRun
    from trainer.observability.events import EventPublisher, EventType, ListSink

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer))
    sink = ListSink()
    with tempfile.TemporaryDirectory() as output:
        status = TrainingRun(config or synchronous_config(), PROBLEMS, output, EventPublisher("golden", sink),
                             scorer=FirstTokenRewardScorer(tokenizer.decode([198])), model=model,
                             tokenizer=tokenizer).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    steps = []
    for event in sink.of_type(EventType.METRICS):
        values = event.payload["values"]
        steps.append({name: float(values[name]).hex() for name in
                      ("learner/loss", "learner/grad_norm", "reward/mean", "learner/trained_sequences")})
    weights = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        weights.update(name.encode())
        weights.update(tensor.detach().contiguous().numpy().tobytes())
    responses = sorted((e.payload["rollout_key"], e.payload["response"]) for e in sink.of_type(EventType.ROLLOUT_FINISHED))
    return {"steps": steps, "weights_sha256": weights.hexdigest(),
            "responses_sha256": hashlib.sha256(json.dumps(responses).encode()).hexdigest()}


if __name__ == "__main__":
    from trainer.learning.models import smollm2_tokenizer

    path = record_path()
    path.write_text(json.dumps(run_synchronous_loop(smollm2_tokenizer()), indent=2) + "\n")
    print(f"wrote {path}")
