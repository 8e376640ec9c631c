"""FSDP2 sharding of the policy, exercised on CPU in a one-process gloo group."""

from __future__ import annotations

import tempfile

import pytest
import torch

from trainer.learning.sharding import decoder_layer_classes, shard_with_fsdp


@pytest.fixture
def one_process_group():
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tempfile.mktemp()}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_the_decoder_layers_are_the_units_fsdp_shards(tiny_policy):
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    model, _ = tiny_policy()
    assert decoder_layer_classes(model) == {LlamaDecoderLayer}


def test_a_model_that_names_no_decoder_layers_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="_no_split_modules"):
        decoder_layer_classes(torch.nn.Linear(2, 2))


def test_a_sharded_policy_trains_and_gathers_full_weights_for_checkpoints(tiny_policy, one_process_group):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    model, _ = tiny_policy()
    original = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    sharded = shard_with_fsdp(model, torch.float32)
    wrapped = [type(module).__name__ for module in sharded.modules() if hasattr(module, "unshard")]
    assert wrapped == ["FSDPLlamaForCausalLM", "FSDPLlamaDecoderLayer", "FSDPLlamaDecoderLayer"]

    sharded(torch.tensor([[1, 2, 3, 4]])).logits.sum().backward()
    assert all(p.grad is not None for p in sharded.parameters())

    full = get_model_state_dict(sharded, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    for name, tensor in full.items():
        assert type(tensor) is torch.Tensor and torch.equal(tensor, original[name]), name
