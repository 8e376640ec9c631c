"""The transformers rollout engine generates with the learner's own model object, whose attention the
learner switched to ``sdpa_per_packed_sequence``: padded prompts and a key/value cache must still get
exactly what transformers' SDPA gives them (those calls are handed to it unchanged)."""

from __future__ import annotations

import torch

from trainer.learning import packed_attention


def test_greedy_generation_of_padded_and_unpadded_prompts_is_the_same_under_either_attention():
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("qwen3", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=16, intermediate_size=128, vocab_size=256,
                                  pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    left_padded = torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]])
    attention_mask = (left_padded != 0).long()
    packed_attention.register()
    generated = {}
    for implementation in ("sdpa", packed_attention.SDPA_PER_PACKED_SEQUENCE):
        model.set_attn_implementation(implementation)
        generated[implementation] = (
            model.generate(input_ids=left_padded, attention_mask=attention_mask, max_new_tokens=8, do_sample=False),
            model.generate(input_ids=left_padded[1:], max_new_tokens=8, do_sample=False),
        )
    for ours, theirs in zip(generated[packed_attention.SDPA_PER_PACKED_SEQUENCE], generated["sdpa"]):
        assert torch.equal(ours, theirs)
