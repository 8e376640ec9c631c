"""Dr.GRPO policy updates, computed the way verl computes them.

Each piece of the objective is a small pure function on tensors, citing where it
comes from; ``Learner.step`` only batches sequences and runs the optimizer.

- Advantages: reward minus the group mean, no division by the standard deviation
  (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv:2503.20783, Dr.GRPO).
- Token loss: PPO's clipped ratio (Schulman et al. 2017, arXiv:1707.06347) with the
  asymmetric "clip-higher" range (Yu et al. 2025, DAPO, arXiv:2503.14476) and the dual
  clip for negative advantages (Ye et al. 2020, arXiv:1912.09729); verl's
  ``compute_policy_loss_vanilla``.
- Aggregation: token losses summed and divided by a constant (Dr.GRPO), verl's
  ``agg_loss(..., "seq-mean-token-sum-norm")``, scaled as the release's verl run scaled it
  at its micro-batch of 2 (``Learner.gradient_scale``), whatever micro-batch this run uses.

Memory: no tensor of (tokens × vocabulary) is ever built for a whole micro-batch. The
log-probs come from the final hidden states chunk by chunk (``ChunkedTokenLogprobs``), and
micro-batches are sequences packed end to end without padding under a token budget per
device (``token_budget_micro_batches``, ``pack_batch``), as verl's dynamic batch size and
remove-padding do. Neither changes the loss. Nor is any tensor of (tokens × tokens) built:
a packed micro-batch's attention runs once per packed sequence (trainer/packed_attention.py
says which path, flash-attention's varlen kernels or causal SDPA per sequence, and why; the
learner logs its choice at start-up). flash-attn is not installed by this project's
requirements today, so every run of ours takes the per-sequence SDPA path.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from trainer import packed_attention
from trainer.compute_dtype import resolve_compute_dtype
from trainer.config import RunConfig
from trainer.rollout.gap import train_inference_gap

logger = logging.getLogger(__name__)

# verl clamps the log-ratio before exp() so one wild token cannot overflow the ratio.
LOG_RATIO_CLAMP = 20.0


@dataclass(frozen=True)
class TrainingSequence:
    """One scored rollout ready for the learner: token ids and its group-relative advantage."""

    prompt_ids: Sequence[int]
    response_ids: Sequence[int]
    advantage: float
    group_key: str = ""  # sequences sharing it came from the same prompt; mini-batches never split a group
    rollout_key: str = ""
    sampled_logprobs: Sequence[float] | None = None  # the rollout engine's, one per response token (trainer/rollout/gap.py)


# --- the objective, piece by piece ---------------------------------------------------------------


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Dr.GRPO advantages (Liu et al. 2025, eq. 5 without the std): reward minus the group's mean.

    ``rewards`` is (G, N): G prompts, N rollouts each, NaN where the verdict was censored.
    Censored rollouts are left out of the mean and get advantage 0, so they carry no
    gradient: a Lean outage is not a wrong proof, and it is not a right one either.
    Returns (G, N).
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (groups, samples), got shape {tuple(rewards.shape)}; reshape to 2-D")
    is_scored = ~torch.isnan(rewards)  # (G, N)
    scored_rewards = torch.where(is_scored, rewards, torch.zeros_like(rewards))
    scored_count = is_scored.sum(dim=1, keepdim=True)  # (G, 1)
    group_mean = scored_rewards.sum(dim=1, keepdim=True) / scored_count.clamp(min=1)  # (G, 1)
    return torch.where(is_scored, rewards - group_mean, torch.zeros_like(rewards))


def importance_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    """π_θ / π_old per token, from log-probs, clamped in log space as verl does. (B, T)."""
    return torch.exp(torch.clamp(logprobs - old_logprobs, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))


def clipped_token_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
    dual_clip: float,
) -> torch.Tensor:
    """Per-token PPO loss with asymmetric clipping and the dual clip; (B, T) in, (B, T) out.

    loss = max(-A·r, -A·clip(r, 1-clip_low, 1+clip_high)), and for A < 0 additionally
    capped at -A·dual_clip (Ye et al. 2020) so a token whose ratio exploded cannot
    dominate the batch. ``advantages`` broadcasts: (B, 1) or (B, T).
    """
    ratio = importance_ratio(logprobs, old_logprobs)  # (B, T)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    ppo_loss = torch.maximum(unclipped, clipped)  # (B, T)
    dual_clipped = torch.minimum(ppo_loss, -advantages * dual_clip)
    return torch.where(advantages < 0, dual_clipped, ppo_loss)


def clipping_masks(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
    dual_clip: float,
) -> dict[str, torch.Tensor]:
    """Which tokens each clip bound silenced, (B, T) booleans, for the clip-fraction metrics."""
    ratio = importance_ratio(logprobs, old_logprobs)
    advantages = advantages.expand_as(ratio)
    return {
        "clip_low": (advantages < 0) & (ratio < 1.0 - clip_low),
        "clip_high": (advantages > 0) & (ratio > 1.0 + clip_high),
        "dual_clip": (advantages < 0) & (ratio > dual_clip),
    }


def constant_divisor_loss(token_loss: torch.Tensor, mask: torch.Tensor, divisor: float) -> torch.Tensor:
    """Dr.GRPO's aggregation: every sequence's token losses summed, divided by a constant.

    verl's ``seq-mean-token-sum-norm``: sum over (B, T) of loss·mask / divisor, where the
    divisor is the maximum response length, not the number of tokens, so long and short
    answers weigh each token alike (Liu et al. 2025, section 3.1). Returns a scalar.
    """
    if divisor <= 0:
        raise ValueError(f"token loss divisor must be positive, got {divisor}; use the maximum response length")
    return (token_loss * mask).sum() / divisor


def learning_rate_at(step: int, peak: float, warmup_steps: int) -> float:
    """Linear warm-up over ``warmup_steps`` optimizer steps (1-based ``step``), then constant."""
    if warmup_steps and step <= warmup_steps:
        return peak * step / warmup_steps
    return peak


# --- batching ----------------------------------------------------------------------------------


def mini_batches(sequences: Sequence[TrainingSequence], prompts_per_mini_batch: int) -> list[list[TrainingSequence]]:
    """Consecutive groups of ``prompts_per_mini_batch`` prompts' sequences, groups kept whole."""
    groups: dict[str, list[TrainingSequence]] = {}
    for sequence in sequences:
        groups.setdefault(sequence.group_key, []).append(sequence)
    ordered_groups = list(groups.values())
    return [
        [sequence for group in ordered_groups[start : start + prompts_per_mini_batch] for sequence in group]
        for start in range(0, len(ordered_groups), prompts_per_mini_batch)
    ]


def chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass
class TokenBatch:
    """One forward pass's tokens and where its response tokens sit, in one of two layouts.

    Padded (``pad_batch``): one row per sequence, prompts left-padded and responses
    right-padded, so every response starts at the same column. Packed (``pack_batch``): one
    row, the sequences end to end without padding, position ids restarting at 0 for each, so
    the model's attention keeps them apart. Either way ``response_ids[b, k]`` is predicted by
    the hidden state at column ``predictor_positions[k]`` of row b.
    """

    input_ids: torch.Tensor  # (B, L)
    attention_mask: torch.Tensor | None  # (B, L); None when packed (sequence boundaries come from position_ids)
    position_ids: torch.Tensor  # (B, L)
    predictor_positions: torch.Tensor  # (K,): the columns whose next token is a response token
    response_ids: torch.Tensor  # (B, K)
    response_mask: torch.Tensor  # (B, K) float, 1.0 at a real response token
    advantages: torch.Tensor  # (B, 1) padded, (1, K) packed: broadcasts against (B, K)
    response_lengths: list[int]  # per sequence, in the order the sequences were given
    packed_lengths: list[int] | None = None  # packed: each sequence's tokens, prompt and response, in row order

    def model_inputs(self) -> dict:
        """The keywords of the model's forward pass for these tokens (packed: each sequence's length too)."""
        return {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "position_ids": self.position_ids,
            "logits_to_keep": self.predictor_positions,
            "use_cache": False,
            **packed_attention.packed_lengths_keyword(self.packed_lengths),
        }

    def per_sequence(self, values: torch.Tensor) -> list[torch.Tensor]:
        """(B, K) values split into one (R_i,) tensor per sequence, in the sequences' order."""
        return list(torch.split(values[self.response_mask.bool()], self.response_lengths))

    def scatter(self, per_sequence: Sequence[torch.Tensor]) -> torch.Tensor:
        """The inverse of ``per_sequence``: one (R_i,) tensor per sequence back into a (B, K) tensor, 0 elsewhere."""
        flat = torch.cat(list(per_sequence)).to(self.response_mask.device)
        values = torch.zeros(self.response_mask.shape, dtype=flat.dtype, device=flat.device)
        values[self.response_mask.bool()] = flat
        return values


PaddedBatch = TokenBatch  # the name earlier callers know


def pad_batch(sequences: Sequence[TrainingSequence], pad_token_id: int, device: torch.device) -> TokenBatch:
    prompt_width = max(len(s.prompt_ids) for s in sequences)
    response_width = max(len(s.response_ids) for s in sequences)
    batch_size = len(sequences)
    input_ids = torch.full((batch_size, prompt_width + response_width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, sequence in enumerate(sequences):
        prompt = torch.as_tensor(list(sequence.prompt_ids), dtype=torch.long)
        response = torch.as_tensor(list(sequence.response_ids), dtype=torch.long)
        input_ids[row, prompt_width - len(prompt) : prompt_width] = prompt
        input_ids[row, prompt_width : prompt_width + len(response)] = response
        attention_mask[row, prompt_width - len(prompt) : prompt_width + len(response)] = 1
    # Left padding shifts token positions; positions follow the real tokens, as in generation.
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    advantages = torch.tensor([[s.advantage] for s in sequences], dtype=torch.float32)
    return TokenBatch(
        input_ids=input_ids.to(device),
        attention_mask=attention_mask.to(device),
        position_ids=position_ids.to(device),
        predictor_positions=torch.arange(prompt_width - 1, prompt_width + response_width - 1, device=device),
        response_ids=input_ids[:, prompt_width:].to(device),
        response_mask=attention_mask[:, prompt_width:].float().to(device),
        advantages=advantages.to(device),
        response_lengths=[len(s.response_ids) for s in sequences],
    )


def pack_batch(sequences: Sequence[TrainingSequence], device: torch.device) -> TokenBatch:
    """The sequences end to end in one row, no padding; position ids restart at 0 for each sequence.

    The learner's attention (trainer/packed_attention.py: causal SDPA per packed sequence,
    told the lengths by ``packed_lengths``, or flash-attention's varlen kernels, which read
    the boundaries from the position ids) then computes exactly what the model computes for
    each sequence alone, no (tokens × tokens) mask in between, and a forward pass costs what
    its tokens cost.
    """
    input_ids, position_ids, predictor_positions, response_ids, advantages = [], [], [], [], []
    packed_lengths = []
    for sequence in sequences:
        offset, prompt_length = len(input_ids), len(sequence.prompt_ids)
        if prompt_length == 0:
            raise ValueError("a training sequence needs at least one prompt token to predict its first response token from")
        tokens = [*sequence.prompt_ids, *sequence.response_ids]
        input_ids.extend(tokens)
        packed_lengths.append(len(tokens))
        position_ids.extend(range(len(tokens)))
        predictor_positions.extend(range(offset + prompt_length - 1, offset + len(tokens) - 1))
        response_ids.extend(sequence.response_ids)
        advantages.extend([sequence.advantage] * len(sequence.response_ids))
    as_row = lambda values, dtype=torch.long: torch.tensor([values], dtype=dtype, device=device)
    return TokenBatch(
        input_ids=as_row(input_ids),
        attention_mask=None,
        position_ids=as_row(position_ids),
        predictor_positions=torch.tensor(predictor_positions, dtype=torch.long, device=device),
        response_ids=as_row(response_ids),
        response_mask=torch.ones((1, len(response_ids)), dtype=torch.float32, device=device),
        advantages=as_row(advantages, torch.float32),
        response_lengths=[len(s.response_ids) for s in sequences],
        packed_lengths=packed_lengths,
    )


def supports_packing(model) -> bool:
    """Whether ``model`` can run packed micro-batches through the learner's packed attention.

    Models built on transformers' attention interface (``_supports_attention_backend``: Llama,
    Qwen2/3, Mistral, ...) take the attention function the learner chooses
    (``packed_attention.choose_packed_attention``). Others get the padded layout.
    """
    return bool(getattr(model, "_supports_attention_backend", False))


def token_batch(sequences: Sequence[TrainingSequence], pad_token_id: int, device: torch.device, *, packed: bool) -> TokenBatch:
    return pack_batch(sequences, device) if packed else pad_batch(sequences, pad_token_id, device)


# --- log-probabilities, never the whole (tokens × vocabulary) tensor ----------------------------------

# Models that transform the logits after the output projection (soft-capping, scaling): the
# log-probs below take the projection's output as the logits, so these would be scored wrongly.
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def check_model_supports_chunked_logprobs(model) -> None:
    """Fail at start-up for a model whose logits are not just its output projection's."""
    config = getattr(model, "config", None)
    transforms = [name for name in _LOGIT_TRANSFORMS if getattr(config, name, None) not in (None, 1, 1.0)]
    if transforms:
        raise ValueError(
            f"{type(model).__name__} transforms its logits after the output projection ({', '.join(transforms)}), "
            "which the learner's chunked log-probabilities do not reproduce; use a model without it (Llama, Qwen2/3)"
        )
    if model.get_output_embeddings() is None:
        raise ValueError(f"{type(model).__name__} has no output projection (get_output_embeddings() is None); use a causal LM")


def _logits_dtype(matmul_dtype: torch.dtype) -> torch.dtype:
    # Softmax arithmetic in float32 at least: bfloat16 logits would round log-probs to 3 digits.
    return torch.promote_types(matmul_dtype, torch.float32)


def _matmul_dtype(hidden: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    # What F.linear would compute in at this point: the autocast dtype inside autocast, else the inputs' own.
    if torch.is_autocast_enabled(hidden.device.type):
        return torch.get_autocast_dtype(hidden.device.type)
    return torch.promote_types(hidden.dtype, weight.dtype)


class ChunkedTokenLogprobs(torch.autograd.Function):
    """log softmax(h·Wᵀ + b) at the label, chunk by chunk: (N, H) hidden states in, (N,) float32 log-probs out.

    The forward keeps only each token's log-sum-exp; the backward recomputes one chunk's
    logits at a time, so no tensor larger than chunk_tokens × vocabulary ever exists, in
    either pass. Logits are float32 (the matrix product itself runs in ``matmul_dtype``,
    bfloat16 under autocast, as the full-vocabulary function's did) and divided by the
    temperature before the softmax. The weight's gradient is summed over chunks in float32
    (or wider, for a float64 model).

    A fused linear-cross-entropy kernel (liger-kernel's, Triton on CUDA) would do the same in
    one kernel, faster; it is not installed in this project (it needs Triton and a GPU, so it
    could not be tested where the suite runs), and the memory bound is already the chunk's.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, temperature: float, chunk_tokens: int, matmul_dtype: torch.dtype):
        with torch.autocast(hidden.device.type, enabled=False):
            cast_weight = weight.to(matmul_dtype)
            cast_bias = None if bias is None else bias.to(matmul_dtype)
            token_logprobs = torch.empty(hidden.shape[0], dtype=_logits_dtype(matmul_dtype), device=hidden.device)
            log_normalizers = torch.empty_like(token_logprobs)
            for start in range(0, hidden.shape[0], chunk_tokens):
                stop = start + chunk_tokens
                logits = ChunkedTokenLogprobs._logits(hidden[start:stop], cast_weight, cast_bias, matmul_dtype, temperature)
                label_logits = logits.gather(-1, labels[start:stop, None]).squeeze(-1)
                # log-sum-exp in place: torch.logsumexp would hold a second (c, V) buffer for exp(logits - max),
                # which the memory plan's fake-tensor tracker does not see.
                maxes = logits.amax(dim=-1)
                log_normalizers[start:stop] = logits.sub_(maxes[:, None]).exp_().sum(dim=-1).log_().add_(maxes)
                token_logprobs[start:stop] = label_logits - log_normalizers[start:stop]
                del logits
        ctx.save_for_backward(hidden, weight, bias, labels, log_normalizers)
        ctx.temperature, ctx.chunk_tokens, ctx.matmul_dtype = temperature, chunk_tokens, matmul_dtype
        return token_logprobs

    @staticmethod
    def _logits(hidden_chunk, cast_weight, cast_bias, matmul_dtype, temperature):
        logits = torch.nn.functional.linear(hidden_chunk.to(matmul_dtype), cast_weight, cast_bias)
        logits = logits.to(_logits_dtype(matmul_dtype))  # (c, V)
        if temperature != 1.0:
            logits = logits / temperature
        return logits

    @staticmethod
    def backward(ctx, grad_output):
        hidden, weight, bias, labels, log_normalizers = ctx.saved_tensors
        temperature, chunk_tokens, matmul_dtype = ctx.temperature, ctx.chunk_tokens, ctx.matmul_dtype
        needs_hidden, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.empty_like(hidden) if needs_hidden else None
        accumulation_dtype = _logits_dtype(matmul_dtype)
        grad_weight = torch.zeros(weight.shape, dtype=accumulation_dtype, device=weight.device) if needs_weight else None
        grad_bias = torch.zeros(bias.shape, dtype=accumulation_dtype, device=bias.device) if needs_bias else None
        with torch.autocast(hidden.device.type, enabled=False):
            cast_weight = weight.to(matmul_dtype)
            cast_bias = None if bias is None else bias.to(matmul_dtype)
            for start in range(0, hidden.shape[0], chunk_tokens):
                stop = start + chunk_tokens
                hidden_chunk = hidden[start:stop].to(matmul_dtype)
                grad_chunk = grad_output[start:stop, None].to(accumulation_dtype)  # (c, 1)
                logits = ChunkedTokenLogprobs._logits(hidden_chunk, cast_weight, cast_bias, matmul_dtype, temperature)
                # d log p(label) / d logits = onehot(label) - softmax(logits); in place, one (c, V) buffer.
                grad_logits = logits.sub_(log_normalizers[start:stop, None]).exp_().mul_(-grad_chunk)
                grad_logits.scatter_add_(-1, labels[start:stop, None], grad_chunk)
                if temperature != 1.0:
                    grad_logits.div_(temperature)
                grad_logits = grad_logits.to(matmul_dtype)
                if needs_hidden:
                    grad_hidden[start:stop] = (grad_logits @ cast_weight).to(hidden.dtype)
                if needs_weight:
                    grad_weight += grad_logits.t() @ hidden_chunk
                if needs_bias:
                    grad_bias += grad_logits.sum(dim=0)
                del logits, grad_logits
        return (
            grad_hidden,
            None if grad_weight is None else grad_weight.to(weight.dtype),
            None if grad_bias is None else grad_bias.to(bias.dtype),
            None, None, None, None,
        )


def chunked_token_logprobs(hidden, weight, bias, labels, temperature: float, chunk_tokens: int) -> torch.Tensor:
    """(..., H) hidden states and (...) labels to (...) float32 log-probs; see ChunkedTokenLogprobs."""
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be at least 1, got {chunk_tokens}")
    flat = ChunkedTokenLogprobs.apply(
        hidden.reshape(-1, hidden.shape[-1]), weight, bias, labels.reshape(-1),
        float(temperature), int(chunk_tokens), _matmul_dtype(hidden, weight),
    )
    return flat.view(labels.shape)


DEFAULT_LOGPROB_CHUNK_TOKENS = 1024


def response_logprobs(model, batch: TokenBatch, temperature: float = 1.0,
                      chunk_tokens: int = DEFAULT_LOGPROB_CHUNK_TOKENS) -> torch.Tensor:
    """log π(response token | everything before it), (B, K), in float32 (or the model's wider dtype), in either layout.

    The model runs its own forward (so FSDP gathers and reduces as usual), but its output
    projection is replaced, for this call only, by ``chunked_token_logprobs``: the model
    hands it the hidden states of the predicting columns only (``logits_to_keep``), and
    what comes back as ``logits`` are the tokens' log-probs. Logits are divided by the
    sampling temperature before the softmax, as verl does, so the learner scores tokens
    under the distribution they were sampled from. Equal, values and gradients, to
    ``full_vocabulary_response_logprobs`` (tests/learner/test_chunked_logprobs_*).
    """
    head = model.get_output_embeddings()
    scale = temperature if temperature > 0 else 1.0
    labels = batch.response_ids

    def token_logprobs_head(hidden_states):  # (B, K, H) -> (B, K)
        return chunked_token_logprobs(hidden_states, head.weight, head.bias, labels, scale, chunk_tokens)

    previous_forward = head.__dict__.get("forward")
    head.forward = token_logprobs_head
    try:
        output = model(**batch.model_inputs())
    finally:
        if previous_forward is None:
            del head.forward
        else:
            head.forward = previous_forward
    return output.logits  # (B, K)


def full_vocabulary_response_logprobs(model, batch: TokenBatch, temperature: float = 1.0) -> torch.Tensor:
    """The learner's log-probs as they were computed before the chunked path: the reference, never on the path.

    Builds the (B, K, V) logits, a float32 copy and a float32 log-softmax: about 30 + 60 + 60 GB
    at the recipe's 24k tokens and Qwen3's vocabulary. Kept for the tests that pin the chunked
    function to it and for benchmarks/learner_memory.py's baseline.
    """
    output = model(**batch.model_inputs())
    logits = output.logits.to(_logits_dtype(output.logits.dtype))  # (B, K, V), float32 at least
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)  # (B, K)


# --- micro-batches -------------------------------------------------------------------------------


def sequence_tokens(sequence: TrainingSequence) -> int:
    return len(sequence.prompt_ids) + len(sequence.response_ids)


def token_budget_micro_batches(sequences: Sequence[TrainingSequence], budget: int) -> list[list[TrainingSequence]]:
    """The fewest micro-batches of at most ``budget`` tokens each, balanced, as verl's dynamic batch size.

    verl (``rearrange_micro_batches``) takes ceil(tokens / budget) micro-batches and balances
    their token sums (Karmarkar-Karp). Here: that many bins, filled longest sequence first
    into the lightest bin, one more bin whenever a bin would exceed the budget, so every
    micro-batch fits. Each keeps its sequences in their given order.
    """
    if not sequences:
        return []
    lengths = [sequence_tokens(s) for s in sequences]
    longest = max(lengths)
    if longest > budget:
        raise ValueError(
            f"a sequence of {longest} tokens exceeds optimizer.micro_batch_tokens ({budget}); raise the budget to at "
            "least the longest prompt plus rollout.max_response_tokens"
        )
    order = sorted(range(len(sequences)), key=lambda index: -lengths[index])
    bins = -(-sum(lengths) // budget)
    while True:
        members: list[list[int]] = [[] for _ in range(bins)]
        totals = [0] * bins
        for index in order:
            lightest = min(range(bins), key=lambda b: (totals[b], b))
            members[lightest].append(index)
            totals[lightest] += lengths[index]
        if max(totals) <= budget:
            break
        bins += 1
    return [[sequences[index] for index in sorted(member)] for member in members if member]


# --- distribution --------------------------------------------------------------------------------


def decoder_layer_classes(model) -> set[type]:
    """The transformer block classes FSDP shards one by one: the model's own ``_no_split_modules``."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    classes = {type(module) for module in model.modules() if type(module).__name__ in names}
    if not classes:
        raise ValueError(
            f"cannot find the decoder layers of {type(model).__name__} to shard (its _no_split_modules is "
            f"{sorted(names) or 'empty'}); use a Hugging Face causal LM that declares them"
        )
    return classes


def shard_with_fsdp(model, param_dtype: torch.dtype) -> torch.nn.Module:
    """FSDP2: each decoder layer its own unit, then the root; master weights stay float32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mixed_precision = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    layer_classes = tuple(decoder_layer_classes(model))
    for module in model.modules():
        if isinstance(module, layer_classes):
            fully_shard(module, mp_policy=mixed_precision)
    fully_shard(model, mp_policy=mixed_precision)
    return model


def is_distributed() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def init_distributed_from_env(num_gpus: int) -> bool:
    """Join the process group a Ray worker (or torchrun) describes in RANK/WORLD_SIZE/MASTER_ADDR.

    Returns whether this process is one of several learner ranks.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if num_gpus <= 1 or world_size <= 1:
        return False
    if not is_distributed():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend=backend)
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return True


# --- the learner ---------------------------------------------------------------------------------


def with_token_rates(metrics: dict) -> dict:
    """Clip fractions and tokens per second from a learner step's token counts and seconds.

    A step that trained no token (every advantage 0) measured neither: they are None, never 0.
    """
    tokens = metrics["tokens"]
    for name in ("clip_low", "clip_high", "dual_clip"):
        metrics[f"{name}_fraction"] = metrics[f"{name}_tokens"] / tokens if tokens else None
    metrics["clip_fraction"] = (metrics["clip_low_tokens"] + metrics["clip_high_tokens"]) / tokens if tokens else None
    metrics["tokens_per_second"] = tokens / metrics["seconds"] if tokens and metrics["seconds"] > 0 else None
    return metrics


class Learner:
    """Owns the policy's optimizer; ``step`` turns one batch of scored rollouts into updates."""

    def __init__(self, config: RunConfig, model, tokenizer):
        self.config = config
        self.tokenizer = tokenizer
        # Joined first: it picks this rank's GPU, which the model must then move to.
        self.is_sharded = init_distributed_from_env(config.cluster.num_gpus)
        is_on_gpu = config.cluster.num_gpus > 0 and torch.cuda.is_available()
        self.device = torch.device("cuda", torch.cuda.current_device()) if is_on_gpu else torch.device("cpu")
        self.compute_dtype = resolve_compute_dtype(config.model.dtype, self.device.type).torch_dtype()
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        check_model_supports_chunked_logprobs(model)
        self.is_packing = supports_packing(model)
        # Chosen once, here: every forward pass of the run then takes the same attention path.
        self.attention_path = (packed_attention.choose_packed_attention(self.device, self.compute_dtype)
                               if self.is_packing else None)
        if self.attention_path is not None:
            packed_attention.use(model, self.attention_path)
        logger.info(self.attention_note)
        model.to(self.device)
        if config.model.gradient_checkpointing and hasattr(model, "gradient_checkpointing_enable"):
            model.gradient_checkpointing_enable()
        if self.is_sharded:
            model = shard_with_fsdp(model, self.compute_dtype)
        self.model = model
        self.model.train()
        optimizer_config = config.optimizer
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=optimizer_config.learning_rate,
            weight_decay=optimizer_config.weight_decay,
            betas=tuple(optimizer_config.betas),
        )
        self.token_loss_divisor = config.token_loss_divisor
        self.optimizer_steps = 0

    @property
    def attention_note(self) -> str:
        """The start-up log line that says which attention the learner's forward passes run."""
        if self.attention_path is None:
            return ("learner attention: padded micro-batches, one row per sequence, the model's own attention "
                    "(it does not take transformers' attention interface, so it cannot pack)")
        return self.attention_path.describe()

    @property
    def rank_and_world(self) -> tuple[int, int]:
        if self.is_sharded:
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1

    def _autocast(self):
        # Sharded models cast through FSDP's MixedPrecisionPolicy; on one device (CPU too), autocast does it.
        is_enabled = self.compute_dtype != torch.float32 and not self.is_sharded
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype, enabled=is_enabled)

    def _batch(self, sequences: Sequence[TrainingSequence]) -> TokenBatch:
        return token_batch(sequences, self.pad_token_id, self.device, packed=self.is_packing)

    def _logprobs(self, batch: TokenBatch) -> torch.Tensor:
        with self._autocast():
            return response_logprobs(
                self.model, batch, self.config.rollout.temperature, self.config.optimizer.logprob_chunk_tokens
            )

    def micro_batches(self, sequences: Sequence[TrainingSequence]) -> list[list[TrainingSequence]]:
        """One rank's sequences grouped into forward passes: by token budget, else by count."""
        budget = self.config.optimizer.micro_batch_tokens
        if budget is not None:
            return token_budget_micro_batches(sequences, budget)
        return [list(micro) for micro in chunks(sequences, self.config.optimizer.micro_batch_sequences)]

    def _micro_batch_plan(self, trained: list[TrainingSequence]) -> list[tuple[list[TrainingSequence], bool]]:
        """This rank's micro-batches of one mini-batch, as (sequences, is_placeholder).

        Sharded ranks must run the same number of forward and backward passes (each one
        gathers and reduces parameters). Every rank holds the whole mini-batch, so each
        works out every rank's plan and, where short of the busiest, runs two-token
        placeholders weighted 0.
        """
        rank, world_size = self.rank_and_world
        plans = [self.micro_batches(trained[other::world_size]) for other in range(world_size)]
        plan = [(micro, False) for micro in plans[rank]]
        placeholder = TrainingSequence([self.pad_token_id], [self.pad_token_id], 0.0)
        while len(plan) < max(len(other) for other in plans):
            plan.append(([placeholder], True))
        return plan

    def _trained(self, mini_batch: Sequence[TrainingSequence]) -> list[TrainingSequence]:
        return [sequence for sequence in mini_batch if sequence.advantage != 0.0]

    @torch.no_grad()
    def old_logprobs(self, batches: Sequence[Sequence[TrainingSequence]]) -> dict[int, torch.Tensor]:
        """π_old of every sequence of this rank's share, keyed by ``id(sequence)``; (R_i,) each.

        Called once per step, before the first update: the ratio's denominator is the
        policy the step starts from, whatever the rollout engine's numerics were. Sequences with
        advantage 0 are scored too (as verl scores the whole batch), though they are never trained:
        the train–inference gap is measured on every answer.
        """
        result = {}
        for mini_batch in batches:
            trained = self._trained(mini_batch)
            # Planned apart, so each rank scores the trained share it will train on (accumulate_gradients).
            untrained = [sequence for sequence in mini_batch if sequence.advantage == 0.0]
            for micro, is_placeholder in [*self._micro_batch_plan(trained), *self._micro_batch_plan(untrained)]:
                batch = self._batch(micro)
                logprobs = self._logprobs(batch)  # (B, K)
                if is_placeholder:
                    continue
                for sequence, values in zip(micro, batch.per_sequence(logprobs)):
                    result[id(sequence)] = values.detach()
        if self.is_sharded and hasattr(self.model, "reshard"):
            # FSDP2 leaves the root's parameters gathered after a forward, for the backward it expects;
            # none follows these, and a step that then trains nothing would clip unsharded gradients.
            self.model.reshard()
        return result

    def gradient_scale(self, mini_batch_sequences: int) -> float:
        """The factor on each micro-batch's Σ token losses / divisor; the same for every micro-batch.

        verl (dp_actor.update_policy) multiplies a micro-batch's ``agg_loss`` by
        micro / mini-batch sequences per rank (``1 / gradient_accumulation``), and FSDP
        averages the ranks' gradients, so the release's gradient is

            release_micro / mini_batch_sequences × ∇ Σ_(sequences, tokens) token loss / divisor

        with release_micro = 2 (its ppo_micro_batch_size_per_gpu) and mini_batch_sequences
        counting every sequence of the mini-batch, zero advantages included. Each rank here
        scales by release_micro / (mini_batch_sequences / world_size), whatever micro-batch
        or token budget it runs, so the sum over micro-batches and the ranks' average give
        exactly that gradient: memory settings never change the optimisation.
        """
        _, world_size = self.rank_and_world
        return self.config.loss.release_micro_batch_sequences / (mini_batch_sequences / world_size)

    def accumulate_gradients(self, mini_batch: Sequence[TrainingSequence], old_logprobs: dict[int, torch.Tensor]) -> dict:
        """Backward passes over one mini-batch's micro-batches; gradients add up in ``.grad``.

        Each micro-batch's loss is its token-loss sum over the constant divisor, times
        ``gradient_scale``. Sequences with advantage 0 are not run: their token losses and
        gradients are exactly 0, so the sum is verl's with them in, at less cost.
        """
        loss_config = self.config.loss
        scale = self.gradient_scale(len(mini_batch))
        totals = {"loss": 0.0, "tokens": 0, "trained_sequences": 0, "clip_low": 0, "clip_high": 0, "dual_clip": 0}
        for micro, is_placeholder in self._micro_batch_plan(self._trained(mini_batch)):
            batch = self._batch(micro)
            if is_placeholder:
                old = torch.zeros_like(batch.response_mask)
            else:
                old = batch.scatter([old_logprobs[id(sequence)] for sequence in micro])  # (B, K)
            logprobs = self._logprobs(batch)  # (B, K)
            token_loss = clipped_token_loss(
                logprobs, old, batch.advantages,
                loss_config.clip_ratio_low, loss_config.clip_ratio_high, loss_config.dual_clip,
            )  # (B, K)
            micro_loss = constant_divisor_loss(token_loss, batch.response_mask, self.token_loss_divisor)
            scaled = micro_loss * (0.0 if is_placeholder else scale)
            scaled.backward()
            if is_placeholder:
                continue
            totals["loss"] += scaled.item()
            totals["tokens"] += int(batch.response_mask.sum())
            totals["trained_sequences"] += len(micro)
            with torch.no_grad():
                masks = clipping_masks(
                    logprobs, old, batch.advantages,
                    loss_config.clip_ratio_low, loss_config.clip_ratio_high, loss_config.dual_clip,
                )
                is_response = batch.response_mask.bool()
                for name, mask in masks.items():
                    totals[name] += int((mask & is_response).sum())
        return totals

    def step(self, sequences: Sequence[TrainingSequence]) -> dict:
        """One batch: π_old first, then one AdamW step per mini-batch of prompts, gradients accumulated."""
        started = time.perf_counter()
        metrics = {
            "loss": 0.0, "grad_norm": 0.0, "grad_norm_max": 0.0, "optimizer_steps": 0, "skipped_steps": 0,
            "sequences": len(sequences), "trained_sequences": 0, "tokens": 0,
        }
        clip_counts = {"clip_low": 0, "clip_high": 0, "dual_clip": 0}
        batches = mini_batches(sequences, self.config.optimizer.mini_batch_prompts)
        old = self.old_logprobs(batches)
        metrics.update(train_inference_gap((old[id(s)], s.sampled_logprobs) for s in sequences if id(s) in old))
        for mini_batch in batches:
            self.optimizer.zero_grad(set_to_none=False)
            totals = self.accumulate_gradients(mini_batch, old)
            for name in clip_counts:
                clip_counts[name] += totals[name]
            metrics["tokens"] += totals["tokens"]
            metrics["trained_sequences"] += totals["trained_sequences"]
            grad_norm = self._clip_gradients()
            if math.isfinite(grad_norm):
                self._set_learning_rate()
                self.optimizer.step()
                metrics["optimizer_steps"] += 1
                metrics["grad_norm"] += grad_norm
            else:
                # As verl does: a non-finite gradient would poison Adam's moments; drop this update.
                metrics["skipped_steps"] += 1
            self.optimizer.zero_grad(set_to_none=False)
            self.optimizer_steps += 1
            metrics["loss"] += totals["loss"]
            metrics["grad_norm_max"] = max(metrics["grad_norm_max"], grad_norm)

        metrics["loss"] /= max(len(batches), 1)
        metrics["grad_norm"] /= max(metrics["optimizer_steps"], 1)
        metrics.update({f"{name}_tokens": count for name, count in clip_counts.items()})
        metrics["seconds"] = time.perf_counter() - started
        return with_token_rates(metrics)

    def _set_learning_rate(self) -> None:
        # Adam's own step count survives a resume (it is in the optimizer's state), so the
        # warm-up does not start again.
        taken = max((int(state["step"]) for state in self.optimizer.state.values() if "step" in state), default=0)
        optimizer_config = self.config.optimizer
        learning_rate = learning_rate_at(taken + 1, optimizer_config.learning_rate, optimizer_config.warmup_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate

    def _clip_gradients(self) -> float:
        parameters = [p for p in self.model.parameters() if p.requires_grad]
        for parameter in parameters:
            # AdamW skips parameters without a gradient; verl's all-zero-advantage mini-batches still
            # decay the weights and Adam's moments, so give every parameter a (zero) gradient.
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
        total_norm = torch.nn.utils.clip_grad_norm_(parameters, self.config.optimizer.grad_clip)
        if hasattr(total_norm, "full_tensor"):
            total_norm = total_norm.full_tensor()
        return float(total_norm)
