"""On CPU each rank samples from a full copy of its sharded policy, refreshed from the gathered weights."""

from __future__ import annotations

import tempfile

import pytest
import torch

from trainer.rollout.replica import ReplicaRolloutEngine
from trainer.learning.sharding import shard_with_fsdp
from trainer.rollout.base import SamplingSettings


@pytest.fixture
def one_process_group():
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tempfile.mktemp()}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def full_weights(model) -> dict[str, torch.Tensor]:
    from trainer.rollout.weights import iter_full_weights

    return {name: tensor.clone() for name, tensor in iter_full_weights(model)}


def test_the_copy_samples_the_sharded_policys_weights_before_and_after_an_update(tiny_policy, one_process_group):
    model, tokenizer = tiny_policy()
    sharded = shard_with_fsdp(model, torch.float32)
    engine = ReplicaRolloutEngine.of(sharded, tokenizer)
    copy_weights = dict(engine.replica.named_parameters())
    assert all(torch.equal(copy_weights[name], tensor) for name, tensor in full_weights(sharded).items())

    optimizer = torch.optim.SGD(sharded.parameters(), lr=0.1)
    sharded(torch.tensor([[1, 2, 3, 4]])).logits.sum().backward()
    optimizer.step()
    updated = full_weights(sharded)
    assert not torch.equal(copy_weights["model.layers.0.mlp.up_proj.weight"], updated["model.layers.0.mlp.up_proj.weight"])
    engine.push_weights(sharded)
    assert all(torch.equal(copy_weights[name], tensor) for name, tensor in updated.items())
    assert engine.replica.lm_head.weight is engine.replica.model.embed_tokens.weight  # still tied

    generations = list(engine.generate(["<|im_start|>user\nhi<|im_end|>\n"], SamplingSettings(
        n=2, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=4, seed=0)))
    assert sorted((g.prompt_index, g.sample_index) for g in generations) == [(0, 0), (0, 1)]
    assert all(1 <= g.num_tokens <= 4 for g in generations)


def test_weights_that_do_not_fit_the_copy_are_refused_with_what_differs(tiny_policy):
    model, tokenizer = tiny_policy()
    engine = ReplicaRolloutEngine.of(model, tokenizer)
    other = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"unknown or misshapen: \['weight', 'bias'\]"):
        engine.push_weights(other)
