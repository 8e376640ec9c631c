"""Attention for packed micro-batches without a (tokens × tokens) tensor.

The learner packs several sequences end to end into one row, position ids restarting at 0
for each (``batching.pack_batch``). transformers' own SDPA and eager paths keep them apart
with a dense (1, 1, T, T) boolean mask, turned into a float bias per attention call: at the
``h100x8`` budget of 32,768 tokens, 1 GiB of mask, 2 GiB of bias and T² work, in the common
case of several answers shorter than the budget. Two paths avoid it:

- ``flash_attention_2``: flash-attention's variable-length kernels, which transformers feeds
  with the sequence boundaries it reads from the restarting position ids. Taken on CUDA when
  the ``flash_attn`` package is installed and the learner computes in bfloat16 or float16 (the
  kernels' only dtypes). It is not in requirements-gpu.lock today, so no run of ours takes it yet.
- ``sdpa_per_packed_sequence`` (this module): PyTorch's ``scaled_dot_product_attention``,
  causal, once per packed sequence, on views of the query, key and value. Exact (each
  sequence sees only itself, as it would alone) and it allocates nothing of T × T; on CUDA
  each call runs PyTorch's fused flash kernel, on CPU its flash kernel for CPU. The cost is one
  kernel launch per sequence per layer, a few per micro-batch.

``flex_attention`` with a document block mask was the third candidate and is not used: without
``torch.compile`` it materialises the scores (T × T per head), and compiled it needs Triton on
a GPU, which the machines this project is tested on do not have.

The learner chooses once, at start-up (``choose_packed_attention``), and logs which.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass

import torch

SDPA_PER_PACKED_SEQUENCE = "sdpa_per_packed_sequence"
FLASH_ATTENTION_2 = "flash_attention_2"
# The keyword the learner passes the packed sequences' token counts under; it reaches every
# attention call through the model's **kwargs, as transformers' own cu_seq_lens_* keywords do.
PACKED_SEQUENCE_LENGTHS = "packed_sequence_lengths"


@dataclass(frozen=True)
class AttentionPath:
    """Which attention a packing learner runs, and why, for its start-up log line."""

    implementation: str  # a transformers attention implementation name
    reason: str

    def describe(self) -> str:
        return f"learner attention for packed micro-batches: {self.implementation} ({self.reason})"


def choose_packed_attention(device: torch.device, compute_dtype: torch.dtype) -> AttentionPath:
    """flash-attention's varlen kernels where they can run, else causal SDPA per packed sequence."""
    is_flash_attn_installed = importlib.util.find_spec("flash_attn") is not None
    if device.type == "cuda" and is_flash_attn_installed and compute_dtype in (torch.bfloat16, torch.float16):
        return AttentionPath(FLASH_ATTENTION_2, "flash-attn installed, CUDA: varlen kernels, boundaries from the "
                                                "restarting position ids")
    if device.type != "cuda":
        why = f"on {device.type}, where flash-attn's kernels do not run"
    elif not is_flash_attn_installed:
        why = "flash-attn is not installed"
    else:
        why = f"flash-attn needs bfloat16 or float16, the learner computes in {compute_dtype}"
    return AttentionPath(SDPA_PER_PACKED_SEQUENCE, f"{why}; causal SDPA once per packed sequence, no tokens × tokens "
                                                   "mask")


def segment_lengths(position_ids: torch.Tensor) -> list[int]:
    """Token counts of the sequences packed in one row, from position ids that restart at each (T,) -> [L_1, ...]."""
    positions = position_ids.tolist()
    lengths, current = [], 0
    for index, position in enumerate(positions):
        if index > 0 and position != positions[index - 1] + 1:
            lengths.append(current)
            current = 0
        current += 1
    lengths.append(current)
    return lengths


def sdpa_per_packed_sequence(
    module: torch.nn.Module,
    query: torch.Tensor,  # (B, H, T, D)
    key: torch.Tensor,  # (B, H_kv, T_kv, D)
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    sliding_window: int | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: (B, T, H, D) out, each packed sequence attending causally to itself only.

    Calls that are not a packed training pass (a padding mask, or a key/value cache longer
    than the queries: the transformers rollout engine generates with this same model) go to
    transformers' own SDPA function unchanged.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if sliding_window is not None:
        raise ValueError(f"{type(module).__name__} uses a sliding window ({sliding_window} tokens), which "
                         f"{SDPA_PER_PACKED_SEQUENCE} does not apply; turn the model's use_sliding_window off")
    lengths = kwargs.pop(PACKED_SEQUENCE_LENGTHS, None)
    if attention_mask is not None or query.shape[2] != key.shape[2]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    batch_size, _, tokens, _ = query.shape
    position_ids = kwargs.get("position_ids")
    outputs = []
    for row in range(batch_size):
        if lengths is not None and batch_size == 1:
            row_lengths = list(lengths)
        elif position_ids is not None:
            row_lengths = segment_lengths(position_ids[min(row, position_ids.shape[0] - 1)])
        else:
            row_lengths = [tokens]
        if sum(row_lengths) != tokens:
            raise ValueError(f"packed sequence lengths {row_lengths} add up to {sum(row_lengths)} tokens, the row has "
                             f"{tokens}; pass {PACKED_SEQUENCE_LENGTHS} from the same packing as the input ids")
        row_query, row_key, row_value = query[row : row + 1], key[row : row + 1], value[row : row + 1]
        pieces = [
            sdpa_attention_forward(module, q, k, v, None, dropout=dropout, scaling=scaling, is_causal=True)[0]
            for q, k, v in zip(*(torch.split(x, row_lengths, dim=2) for x in (row_query, row_key, row_value)))
        ]  # each (1, L_i, H, D)
        outputs.append(torch.cat(pieces, dim=1) if len(pieces) > 1 else pieces[0])
    return (torch.cat(outputs, dim=0) if batch_size > 1 else outputs[0]), None


def _mask_for_sdpa_per_packed_sequence(*args, attention_mask=None, q_length=None, kv_length=None, **kwargs):
    """No mask for a packed training pass (the attention function reads the boundaries); transformers' SDPA mask otherwise."""
    from transformers.masking_utils import sdpa_mask

    if attention_mask is None and q_length == kv_length and not kwargs.get("q_offset") and not kwargs.get("kv_offset"):
        return None
    return sdpa_mask(*args, attention_mask=attention_mask, q_length=q_length, kv_length=kv_length, **kwargs)


def register() -> None:
    """Make ``sdpa_per_packed_sequence`` a transformers attention implementation (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(SDPA_PER_PACKED_SEQUENCE, sdpa_per_packed_sequence)
    AttentionMaskInterface.register(SDPA_PER_PACKED_SEQUENCE, _mask_for_sdpa_per_packed_sequence)


def use(model, path: AttentionPath) -> None:
    """Switch ``model``'s attention to ``path`` (every sub-model too)."""
    if path.implementation == SDPA_PER_PACKED_SEQUENCE:
        register()
    model.set_attn_implementation(path.implementation)


def packed_lengths_keyword(lengths: Sequence[int] | None) -> dict:
    """The model keyword that hands the packed sequences' token counts to the attention function; empty when unpacked."""
    return {} if lengths is None else {PACKED_SEQUENCE_LENGTHS: list(lengths)}
