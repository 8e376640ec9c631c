"""The learner's weights leave it whole, under a checkpoint's names, however it is wrapped or sharded."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

from trainer.rollout.weights import checkpoint_name, iter_full_weights


@pytest.mark.parametrize(
    ("wrapped", "plain"),
    [
        ("module.model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight"),
        ("_fsdp_wrapped_module.model.layers.1._fsdp_wrapped_module.self_attn.q_proj.weight",
         "model.layers.1.self_attn.q_proj.weight"),
        ("model.layers.2._checkpoint_wrapped_module.mlp.down_proj.weight", "model.layers.2.mlp.down_proj.weight"),
        ("_orig_mod.lm_head.weight", "lm_head.weight"),
        ("model.embed_tokens.weight", "model.embed_tokens.weight"),
    ],
)
def test_it_removes_the_names_wrappers_add_and_nothing_else(wrapped, plain):
    assert checkpoint_name(wrapped) == plain


def test_it_yields_tied_weights_once(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, tie_word_embeddings=True)
    names = [name for name, _ in iter_full_weights(LlamaForCausalLM(config))]
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names
    assert len(names) == len(set(names))


def test_it_casts_each_tensor_to_the_asked_dtype_without_touching_the_model(random_llama):
    for name, tensor in iter_full_weights(random_llama, dtype=torch.bfloat16):
        assert tensor.dtype == torch.bfloat16
    assert {p.dtype for p in random_llama.parameters()} == {torch.float32}


@pytest.fixture
def one_rank_process_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_it_gathers_fsdp2_sharded_parameters_into_full_tensors(one_rank_process_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 2))
    expected = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    mesh = init_device_mesh("cpu", (1,))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    assert all(isinstance(p, DTensor) for p in model.parameters())

    gathered = dict(iter_full_weights(model))

    assert set(gathered) == set(expected)
    for name, tensor in gathered.items():
        assert not isinstance(tensor, DTensor)
        assert torch.equal(tensor, expected[name])
