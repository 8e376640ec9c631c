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
  ``agg_loss(..., "seq-mean-token-sum-norm")`` per micro-batch, scaled by the
  micro-batch's share of the mini-batch (verl's ``loss_scale_factor``, i.e.
  1 / gradient-accumulation steps when micro-batches are equal).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from trainer.config import RunConfig

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
class PaddedBatch:
    """Prompts left-padded, responses right-padded, so every response starts at the same column."""

    input_ids: torch.Tensor  # (B, P + R)
    attention_mask: torch.Tensor  # (B, P + R)
    position_ids: torch.Tensor  # (B, P + R)
    response_ids: torch.Tensor  # (B, R)
    response_mask: torch.Tensor  # (B, R) float
    advantages: torch.Tensor  # (B, 1)


def pad_batch(sequences: Sequence[TrainingSequence], pad_token_id: int, device: torch.device) -> PaddedBatch:
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
    return PaddedBatch(
        input_ids=input_ids.to(device),
        attention_mask=attention_mask.to(device),
        position_ids=position_ids.to(device),
        response_ids=input_ids[:, prompt_width:].to(device),
        response_mask=attention_mask[:, prompt_width:].float().to(device),
        advantages=advantages.to(device),
    )


def response_logprobs(model, batch: PaddedBatch, temperature: float = 1.0) -> torch.Tensor:
    """log π(response token | everything before it), (B, R), in float32.

    Logits are divided by the sampling temperature before the softmax, as verl does, so
    the learner scores tokens under the distribution they were sampled from.
    """
    response_width = batch.response_ids.shape[1]
    output = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        # Only the logits that predict response tokens: saves the vocabulary projection of the prompt.
        logits_to_keep=response_width + 1,
        use_cache=False,
    )
    logits = output.logits[:, :-1, :].float()  # (B, R, V)
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)  # (B, R)


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


class Learner:
    """Owns the policy's optimizer; ``step`` turns one batch of scored rollouts into updates."""

    def __init__(self, config: RunConfig, model, tokenizer):
        self.config = config
        self.tokenizer = tokenizer
        # Joined first: it picks this rank's GPU, which the model must then move to.
        self.is_sharded = init_distributed_from_env(config.cluster.num_gpus)
        is_on_gpu = config.cluster.num_gpus > 0 and torch.cuda.is_available()
        self.device = torch.device("cuda", torch.cuda.current_device()) if is_on_gpu else torch.device("cpu")
        self.compute_dtype = torch.bfloat16 if config.model.dtype == "bfloat16" else torch.float32
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
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
    def rank_and_world(self) -> tuple[int, int]:
        if self.is_sharded:
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1

    def _autocast(self):
        # Sharded models cast through FSDP's MixedPrecisionPolicy; on one device (CPU too), autocast does it.
        is_enabled = self.compute_dtype != torch.float32 and not self.is_sharded
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype, enabled=is_enabled)

    def _logprobs(self, batch: PaddedBatch) -> torch.Tensor:
        with self._autocast():
            return response_logprobs(self.model, batch, self.config.rollout.temperature)

    def _micro_batch_plan(self, trained: list[TrainingSequence]) -> list[tuple[list[TrainingSequence], bool]]:
        """This rank's micro-batches of one mini-batch, as (sequences, is_placeholder).

        Sharded ranks must run the same number of forward and backward passes (each one
        gathers and reduces parameters), so a rank short of work runs placeholders
        weighted 0.
        """
        rank, world_size = self.rank_and_world
        size = self.config.optimizer.micro_batch_sequences
        mine = trained[rank::world_size]
        plan = [(list(micro), False) for micro in chunks(mine, size)]
        busiest_rank_sequences = math.ceil(len(trained) / world_size)
        while len(plan) < math.ceil(busiest_rank_sequences / size):
            plan.append(([trained[0]], True))
        return plan

    def _trained(self, mini_batch: Sequence[TrainingSequence]) -> list[TrainingSequence]:
        return [sequence for sequence in mini_batch if sequence.advantage != 0.0]

    @torch.no_grad()
    def old_logprobs(self, batches: Sequence[Sequence[TrainingSequence]]) -> dict[int, torch.Tensor]:
        """π_old of every sequence this rank trains on, keyed by ``id(sequence)``; (R_i,) each.

        Called once per step, before the first update: the ratio's denominator is the
        policy the step starts from, whatever the rollout engine's numerics were.
        """
        result = {}
        for mini_batch in batches:
            for micro, _ in self._micro_batch_plan(self._trained(mini_batch)):
                batch = pad_batch(micro, self.pad_token_id, self.device)
                logprobs = self._logprobs(batch)  # (B, R)
                for row, sequence in enumerate(micro):
                    result[id(sequence)] = logprobs[row, : len(sequence.response_ids)].detach()
        return result

    def accumulate_gradients(self, mini_batch: Sequence[TrainingSequence], old_logprobs: dict[int, torch.Tensor]) -> dict:
        """Backward passes over one mini-batch's micro-batches; gradients add up in ``.grad``.

        Each micro-batch's loss is its token-loss sum over the constant divisor, times
        micro_batch_sequences / mini-batch size (verl: 1 / gradient-accumulation steps).
        Sequences with advantage 0 are not run: their token losses and gradients are
        exactly 0, so the sum is verl's with them in, at less cost.
        """
        loss_config = self.config.loss
        _, world_size = self.rank_and_world
        micro_size = self.config.optimizer.micro_batch_sequences
        micro_scale = micro_size / (len(mini_batch) / world_size)
        totals = {"loss": 0.0, "tokens": 0, "trained_sequences": 0, "clip_low": 0, "clip_high": 0, "dual_clip": 0}
        for micro, is_placeholder in self._micro_batch_plan(self._trained(mini_batch)):
            batch = pad_batch(micro, self.pad_token_id, self.device)
            old = torch.zeros_like(batch.response_mask)  # (B, R)
            for row, sequence in enumerate(micro):
                old[row, : len(sequence.response_ids)] = old_logprobs[id(sequence)]
            logprobs = self._logprobs(batch)  # (B, R)
            token_loss = clipped_token_loss(
                logprobs, old, batch.advantages,
                loss_config.clip_ratio_low, loss_config.clip_ratio_high, loss_config.dual_clip,
            )  # (B, R)
            micro_loss = constant_divisor_loss(token_loss, batch.response_mask, self.token_loss_divisor)
            scaled = micro_loss * (0.0 if is_placeholder else micro_scale)
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
        tokens = max(metrics["tokens"], 1)
        for name, count in clip_counts.items():
            metrics[f"{name}_fraction"] = count / tokens
        metrics["clip_fraction"] = (clip_counts["clip_low"] + clip_counts["clip_high"]) / tokens
        metrics["seconds"] = time.perf_counter() - started
        metrics["tokens_per_second"] = metrics["tokens"] / metrics["seconds"] if metrics["seconds"] > 0 else 0.0
        return metrics

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
