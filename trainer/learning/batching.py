"""The learner's batches: scored rollouts as training sequences, grouped into mini-batches and micro-batches, laid out as tokens.

Micro-batches are sequences packed end to end without padding under a token budget per device
(``token_budget_micro_batches``, ``pack_batch``), as verl's dynamic batch size and remove-padding
do; a model that cannot take the learner's packed attention gets the padded layout (``pad_batch``).
Neither layout changes the loss (tests/learning/test_packed_sequences_score_as_unpacked.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from trainer.learning import packed_attention


@dataclass(frozen=True)
class TrainingSequence:
    """One scored rollout ready for the learner: token ids and its group-relative advantage."""

    prompt_ids: Sequence[int]
    response_ids: Sequence[int]
    advantage: float
    group_key: str = ""  # sequences sharing it came from the same prompt; mini-batches never split a group
    rollout_key: str = ""
    sampled_logprobs: Sequence[float] | None = None  # the rollout engine's, one per response token (trainer/observability/gap.py)
    # True at response tokens the engine did not sample (Lean's replies, rollout.lean_tool_calls): context, zero loss weight.
    context_mask: Sequence[bool] | None = None

    def __post_init__(self) -> None:
        if self.context_mask is not None and len(self.context_mask) != len(self.response_ids):
            raise ValueError(f"a context mask of {len(self.context_mask)} flags for a response of "
                             f"{len(self.response_ids)} tokens; give one flag per response token")


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
    context_mask: torch.Tensor | None = None  # (B, K) bool, True at context tokens (Lean's replies); None when none

    @property
    def loss_mask(self) -> torch.Tensor:
        """(B, K) float: the tokens the loss weighs, 1.0 at a response token the engine sampled; Lean's replies
        (context, not policy) weigh 0. The response mask itself when there is no context."""
        if self.context_mask is None:
            return self.response_mask
        return self.response_mask * (~self.context_mask).to(self.response_mask.dtype)

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
    context_mask = None
    if any(s.context_mask is not None for s in sequences):
        context_mask = torch.zeros((batch_size, response_width), dtype=torch.bool)
        for row, sequence in enumerate(sequences):
            if sequence.context_mask is not None:
                context_mask[row, : len(sequence.response_ids)] = torch.as_tensor(list(sequence.context_mask), dtype=torch.bool)
        context_mask = context_mask.to(device)
    return TokenBatch(
        context_mask=context_mask,
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

    The learner's attention (trainer/learning/packed_attention.py: causal SDPA per packed sequence,
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
    context_mask = None
    if any(s.context_mask is not None for s in sequences):
        flags = [flag for s in sequences for flag in (s.context_mask if s.context_mask is not None else [False] * len(s.response_ids))]
        context_mask = as_row(flags, torch.bool)
    return TokenBatch(
        context_mask=context_mask,
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
