"""The learner picks its packed attention once, at start-up, by device and what is installed, and says which."""

from __future__ import annotations

import importlib.util
import logging

import torch

from tests.learning.conftest import tiny_run_config
from trainer.learning import packed_attention
from trainer.learning.learner import Learner


def test_on_cpu_it_runs_causal_sdpa_per_packed_sequence_and_logs_that_at_start_up(tiny_policy, caplog):
    model, tokenizer = tiny_policy()
    with caplog.at_level(logging.INFO, logger="trainer.learning.learner"):
        learner = Learner(tiny_run_config(), model, tokenizer)
    assert learner.model.config._attn_implementation == packed_attention.SDPA_PER_PACKED_SEQUENCE
    assert learner.attention_note in caplog.messages
    assert learner.attention_note.startswith("learner attention for packed micro-batches: sdpa_per_packed_sequence")


def test_on_cuda_it_takes_flash_attentions_varlen_kernels_only_where_flash_attn_is_installed(monkeypatch):
    cuda = torch.device("cuda", 0)
    is_installed = importlib.util.find_spec("flash_attn") is not None
    chosen = packed_attention.choose_packed_attention(cuda, torch.bfloat16)
    assert chosen.implementation == (packed_attention.FLASH_ATTENTION_2 if is_installed
                                     else packed_attention.SDPA_PER_PACKED_SEQUENCE)
    # The decision alone, with flash-attn's presence pretended (it cannot be installed without a GPU).
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "flash_attn" else real_find_spec(name, *a))
    assert packed_attention.choose_packed_attention(cuda, torch.bfloat16).implementation == "flash_attention_2"
    float32 = packed_attention.choose_packed_attention(cuda, torch.float32)
    assert float32.implementation == packed_attention.SDPA_PER_PACKED_SEQUENCE
    assert "needs bfloat16 or float16" in float32.reason


def test_the_segments_are_read_from_position_ids_that_restart_when_no_lengths_are_given():
    assert packed_attention.segment_lengths(torch.tensor([0, 1, 2, 0, 0, 1])) == [3, 1, 2]
