"""model.dtype is the compute precision: bfloat16 rollouts come from a bfloat16 copy, while the
learner keeps float32 master weights and computes under autocast, on the CPU as on a GPU."""

from __future__ import annotations

import torch

from tests.learning.conftest import tiny_run_config
from trainer.learning.learner import Learner
from trainer.learning.batching import TrainingSequence
from trainer.rollout.base import SamplingSettings
from trainer.rollout.engines import build_engine
from trainer.rollout.replica import ReplicaRolloutEngine
from trainer.rollout.transformers_engine import TransformersEngine

PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def sequences() -> list[TrainingSequence]:
    return [
        TrainingSequence(prompt_ids=[11, 12, 13], response_ids=[21, 22, 23], advantage=0.5, group_key="p0"),
        TrainingSequence(prompt_ids=[11, 12, 13], response_ids=[24, 25], advantage=-0.5, group_key="p0"),
    ]


def test_a_float32_run_samples_from_the_learners_own_module(tiny_policy):
    model, tokenizer = tiny_policy()
    engine = build_engine(tiny_run_config(model={"dtype": "float32"}), model, tokenizer)
    assert isinstance(engine, TransformersEngine)


def test_a_bfloat16_run_samples_from_a_bfloat16_copy_that_follows_every_update(tiny_policy):
    config = tiny_run_config(model={"dtype": "bfloat16"})
    model, tokenizer = tiny_policy()
    learner = Learner(config, model, tokenizer)
    engine = build_engine(config, model, tokenizer)
    assert isinstance(engine, ReplicaRolloutEngine)
    assert {p.dtype for p in engine.replica.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # master weights stay float32

    before = model.model.layers[0].mlp.up_proj.weight.detach().clone()
    metrics = learner.step(sequences())
    assert metrics["optimizer_steps"] == 1
    after = model.model.layers[0].mlp.up_proj.weight.detach()
    assert after.dtype == torch.float32 and not torch.equal(before, after)

    copy = engine.replica.model.layers[0].mlp.up_proj.weight
    assert torch.equal(copy, before.to(torch.bfloat16))  # not pushed yet: still the old policy
    engine.push_weights(model)
    assert torch.equal(copy, after.to(torch.bfloat16))

    generations = list(engine.generate([PROMPT], SamplingSettings(
        n=2, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=4, seed=0)))
    assert sorted((g.prompt_index, g.sample_index) for g in generations) == [(0, 0), (0, 1)]


def test_the_learner_computes_in_bfloat16_on_the_cpu_when_asked(tiny_policy):
    model, tokenizer = tiny_policy()
    learner = Learner(tiny_run_config(model={"dtype": "bfloat16"}), model, tokenizer)
    seen = []
    hook = model.model.layers[0].mlp.up_proj.register_forward_hook(lambda module, args, output: seen.append(output.dtype))
    try:
        learner.step(sequences())
    finally:
        hook.remove()
    assert seen and set(seen) == {torch.bfloat16}
