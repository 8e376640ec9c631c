"""The synchronous loop's numbers, recorded before asynchronous RL existed (tests/asynchronous/data).

What holds on every x86 CPU is compared exactly: the sampled answers, the rewards, the trained-sequence counts.
The float32 figures are not the same bits everywhere: ATen and oneDNN choose their kernels by instruction set
(AVX2, AVX512, AMX) and the BLAS choose their blocking by the CPU's caches, so sums run in another order and the
last bits move (an Intel Xeon with AMX and the AMD EPYC the first record came from differ from the first step).
They are compared within tolerances set by float32's precision (below, with the reasoning), which a real change
of the loop (another normalisation, a step trained twice, a lost micro-batch) exceeds by orders of magnitude.

``python -m tests.asynchronous.synchronous_loop`` rewrites the record: do that only for a change meant to alter
the synchronous loop's numbers, and say why in its commit.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import tempfile
from pathlib import Path

from tests.learning.conftest import FirstTokenRewardScorer, tiny_run_config
from trainer.recipe.problems import Problem

RECORD = Path(__file__).parent / "data" / "synchronous_loop.float32.json"
EXACT_PER_STEP = ("reward/mean", "learner/trained_sequences")

# The loss is a sum of advantage-weighted token terms of size ~0.1–1 whose advantages cancel (they sum to 0 in a
# group), so its value (~1e-3) is far smaller than its terms and only an absolute bound means anything: float32's
# rounding over the ~50 terms of a step is ~50 × 6e-8 ≈ 3e-6 at worst. Measured across CPUs: 2e-7.
LOSS_ABSOLUTE_TOLERANCE = 1e-5
# Norms are sums of squares, no cancellation: relative error of a few float32 epsilons per reduction level.
# Measured across CPUs: 1e-6 for the gradient norm, see the record's figures for the weights' updates.
NORM_RELATIVE_TOLERANCE = 1e-4


def stable_part(record: dict) -> dict:
    """What no CPU changes: the sampled answers, the rewards, how many sequences were trained."""
    return {"responses_sha256": record["responses_sha256"],
            "steps": [{name: step[name] for name in EXACT_PER_STEP} for step in record["steps"]]}


def float_differences(measured: dict, recorded: dict) -> list[str]:
    """Each float figure outside its tolerance, in words; empty when the two agree."""
    differences = []
    for number, (now, then) in enumerate(zip(measured["steps"], recorded["steps"], strict=True), start=1):
        if abs(now["learner/loss"] - then["learner/loss"]) > LOSS_ABSOLUTE_TOLERANCE:
            differences.append(f"step {number} learner/loss {now['learner/loss']!r}, recorded {then['learner/loss']!r}")
        if not math.isclose(now["learner/grad_norm"], then["learner/grad_norm"], rel_tol=NORM_RELATIVE_TOLERANCE):
            differences.append(f"step {number} learner/grad_norm {now['learner/grad_norm']!r}, "
                               f"recorded {then['learner/grad_norm']!r}")
    if set(measured["weight_update_norms"]) != set(recorded["weight_update_norms"]):
        differences.append("the model's parameters are not the recorded ones")
    for name, then in recorded["weight_update_norms"].items():
        now = measured["weight_update_norms"].get(name)
        if now is not None and not math.isclose(now, then, rel_tol=NORM_RELATIVE_TOLERANCE, abs_tol=1e-9):
            differences.append(f"{name}: the update's norm {now!r}, recorded {then!r}")
    return differences


PROBLEMS = [Problem(f"p{i}", f"theorem t{i} : ({i} : ℕ) + 1 = {i + 1} := by") for i in range(4)]


def synchronous_config(schedule: dict | None = None, **rollout):
    return tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 4, "max_response_tokens": 6, "top_k": 2, **rollout},
        optimizer={"learning_rate": 1e-3, "mini_batch_prompts": 1, "micro_batch_sequences": 2},
        schedule={"total_steps": 3, "eval_every": 0, "checkpoint_every": 0, **(schedule or {})},
    )


def run_synchronous_loop(tokenizer, config=None) -> dict:
    """Three steps of the tiny model, from seed 0: each step's figures and the norm of each parameter's update."""
    from trainer.learning.models import tiny_random_policy
    from trainer.loop.driver import RunStatus, TrainingRun
    from trainer.observability.events import EventPublisher, EventType, ListSink

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer))
    initial = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    sink = ListSink()
    with tempfile.TemporaryDirectory() as output:
        status = TrainingRun(config or synchronous_config(), PROBLEMS, output, EventPublisher("golden", sink),
                             scorer=FirstTokenRewardScorer(tokenizer.decode([198])), model=model,
                             tokenizer=tokenizer).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    steps = []
    for event in sink.of_type(EventType.METRICS):
        values = event.payload["values"]
        steps.append({name: float(values[name]) for name in (*EXACT_PER_STEP, "learner/loss", "learner/grad_norm")})
    update_norms = {name: float((tensor.detach().double() - initial[name].double()).norm())
                    for name, tensor in model.state_dict().items()}
    responses = sorted((e.payload["rollout_key"], e.payload["response"]) for e in sink.of_type(EventType.ROLLOUT_FINISHED))
    return {"steps": steps, "weight_update_norms": update_norms,
            "responses_sha256": hashlib.sha256(json.dumps(responses).encode()).hexdigest()}


if __name__ == "__main__":
    from trainer.learning.models import smollm2_tokenizer

    RECORD.write_text(json.dumps(run_synchronous_loop(smollm2_tokenizer()), indent=2) + "\n")
    print(f"wrote {RECORD}")
