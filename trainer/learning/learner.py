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

Memory: no tensor of (tokens × vocabulary) is ever built for a whole micro-batch
(trainer/learning/token_logprobs.py), and micro-batches are sequences packed end to end under a token
budget (trainer/learning/batching.py); neither changes the loss. Nor is any tensor of (tokens × tokens)
built: a packed micro-batch's attention runs once per packed sequence (trainer/learning/packed_attention.py
says which path and why; the learner logs its choice at start-up). Several ranks shard the model
with FSDP2 (trainer/learning/sharding.py).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import torch

from trainer.compute_dtype import resolve_compute_dtype
from trainer.config import RunConfig
from trainer.learning import packed_attention
from trainer.learning.batching import (
    TokenBatch,
    TrainingSequence,
    chunks,
    mini_batches,
    supports_packing,
    token_batch,
    token_budget_micro_batches,
)
from trainer.learning.sharding import init_distributed_from_env, shard_with_fsdp
from trainer.learning.token_logprobs import check_model_supports_chunked_logprobs, response_logprobs
from trainer.observability import token_records
from trainer.observability.gap import train_inference_gap

logger = logging.getLogger(__name__)

# verl clamps the log-ratio before exp() so one wild token cannot overflow the ratio.
LOG_RATIO_CLAMP = 20.0


# --- the objective, piece by piece ---------------------------------------------------------------


def sampled_only(learner_logprobs: torch.Tensor, sequence: TrainingSequence) -> tuple[torch.Tensor, Sequence[float] | None]:
    """The learner's (R,) and the engine's log-probabilities of the tokens the engine sampled: Lean's replies
    (context) are in neither, so the train–inference gap compares only what both computed."""
    if sequence.context_mask is None or sequence.sampled_logprobs is None:
        return learner_logprobs, sequence.sampled_logprobs
    keep = [not flag for flag in sequence.context_mask]
    return (learner_logprobs[torch.as_tensor(keep, device=learner_logprobs.device)],
            [value for value, kept in zip(sequence.sampled_logprobs, keep) if kept])


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Dr.GRPO advantages (Liu et al. 2025, eq. 5 without the std): reward minus the group's mean.

    ``rewards`` is (G, N): G prompts, N rollouts each, NaN where the verdict was censored.
    Censored rollouts are left out of the mean and get advantage 0, so they carry no
    gradient: a Lean outage is not a wrong proof, and it is not a right one either.

    A group with a single scored answer has no mean to compare it with; it keeps its raw
    reward, as the release's verl gives it (``compute_grpo_outcome_advantage`` in
    ``verl/trainer/ppo/core_algos.py``: a group of one has mean 0 and std 1). Here that
    group arises when ``rollout.samples_per_prompt`` is 1, or when Lean censored its siblings.
    Returns (G, N).
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (groups, samples), got shape {tuple(rewards.shape)}; reshape to 2-D")
    is_scored = ~torch.isnan(rewards)  # (G, N)
    scored_rewards = torch.where(is_scored, rewards, torch.zeros_like(rewards))
    scored_count = is_scored.sum(dim=1, keepdim=True)  # (G, 1)
    group_mean = scored_rewards.sum(dim=1, keepdim=True) / scored_count.clamp(min=1)  # (G, 1)
    group_mean = torch.where(scored_count == 1, torch.zeros_like(group_mean), group_mean)  # verl's group of one
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


def behaviour_importance_weights(proximal_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor,
                                 cap: float) -> torch.Tensor:
    """min(π_prox / π_behaviour, C) per token, (B, T): the truncated importance weight of an asynchronous run.

    The rollout engine sampled each token from an older policy (π_behaviour, its own log-probability
    of the token); the learner's π_old pass at the start of the step is the proximal policy the PPO
    ratio is taken against. Weighting each token's loss by their ratio corrects for the staleness,
    and the cap C keeps a token the old policy rarely chose from dominating. The weight is truncated at C,
    as verl's rollout correction (truncated IS) does; AReaL's decoupled PPO (Fu et al. 2025, eq. 5) takes the
    same ratio but drops a token above its cap instead. No gradient flows through it.

    A behaviour log-probability that was not measured (NaN: a Lean reply's token, never sampled, or one the engine
    did not return; trainer/rollout/lean_tool.py ``NOT_MEASURED``) gets weight 0: its staleness cannot be
    corrected, so it is not trained on, and never read as probability 1.
    """
    is_measured = ~torch.isnan(behaviour_logprobs)  # (B, T)
    ratio = importance_ratio(proximal_logprobs, torch.where(is_measured, behaviour_logprobs, proximal_logprobs))
    return torch.where(is_measured, ratio.clamp(max=cap), torch.zeros_like(ratio)).detach()


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


def adamw(parameters, device: torch.device, *, is_sharded: bool, **settings) -> torch.optim.AdamW:
    """AdamW as the release runs it; on one CPU, its fused kernel.

    torch picks the fast implementations (foreach, fused) for CUDA tensors only: on a CPU it runs its per-tensor
    loop, several passes over memory per parameter, at about a tenth of what the memory allows
    (benchmarks/learner_roofline.py). The fused CPU kernel is the same update in one pass, equal to the loop's to
    the last bit or two of float32. Sharded parameters (DTensors) keep torch's default.
    """
    fused = device.type == "cpu" and not is_sharded
    return torch.optim.AdamW(parameters, fused=True if fused else None, **settings)


def learner_device(config: RunConfig) -> torch.device:
    """This rank's GPU (once torch.distributed has picked it), or the CPU where the run's start allowed one."""
    is_on_gpu = config.cluster.num_gpus > 0 and torch.cuda.is_available()
    return torch.device("cuda", torch.cuda.current_device()) if is_on_gpu else torch.device("cpu")


class Learner:
    """Owns the policy's optimizer; ``step`` turns one batch of scored rollouts into updates."""

    def __init__(self, config: RunConfig, model, tokenizer):
        self.config = config
        self.tokenizer = tokenizer
        # Joined first: it picks this rank's GPU, which the model must then move to.
        self.is_sharded = init_distributed_from_env(config.cluster.num_gpus)
        # The CPU with num_gpus > 0 only where the run's start allowed it (check_cuda_for_gpus: a named CPU
        # stand-in for GPUs) or for the memory plan's fake tensors; a real run without CUDA never gets here.
        self.device = learner_device(config)
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
        self.optimizer = adamw(self.model.parameters(), self.device, is_sharded=self.is_sharded,
                               lr=optimizer_config.learning_rate, weight_decay=optimizer_config.weight_decay,
                               betas=tuple(optimizer_config.betas))
        self.token_loss_divisor = config.token_loss_divisor
        self.optimizer_steps = 0
        # Asynchronous RL samples from an older policy; the synchronous loop's loss stays the release's, untouched.
        self.corrects_for_the_behaviour_policy = config.rollout.max_staleness > 0
        # The last step's per-token records of this rank's share (trainer/observability/token_records.py); the driver writes them.
        self.token_records: list = []
        self._entropies: dict[int, torch.Tensor] = {}
        self._loss_weights: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

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

    def _logprobs(self, batch: TokenBatch, *, with_entropy: bool = False):
        with self._autocast():
            return response_logprobs(
                self.model, batch, self.config.rollout.temperature, self.config.optimizer.logprob_chunk_tokens,
                with_entropy=with_entropy,
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
                # The entropy comes from the same chunks, for the token records; the log-probs are the same bits.
                logprobs, entropies = self._logprobs(batch, with_entropy=True)  # (B, K), (B, K)
                if is_placeholder:
                    continue
                for sequence, values, entropy in zip(micro, batch.per_sequence(logprobs), batch.per_sequence(entropies)):
                    result[id(sequence)] = values.detach()
                    self._entropies[id(sequence)] = entropy.float().cpu()
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
            importance_weights = None
            if self.corrects_for_the_behaviour_policy and not is_placeholder:
                behaviour = batch.scatter([torch.tensor(sequence.sampled_logprobs, dtype=old.dtype) for sequence in micro])
                importance_weights = behaviour_importance_weights(old, behaviour, loss_config.behaviour_is_cap)
                token_loss = token_loss * importance_weights
            micro_loss = constant_divisor_loss(token_loss, batch.loss_mask, self.token_loss_divisor)
            scaled = micro_loss * (0.0 if is_placeholder else scale)
            scaled.backward()
            if is_placeholder:
                continue
            totals["loss"] += scaled.item()
            totals["tokens"] += int(batch.loss_mask.sum())
            totals["trained_sequences"] += len(micro)
            with torch.no_grad():
                masks = clipping_masks(
                    logprobs, old, batch.advantages,
                    loss_config.clip_ratio_low, loss_config.clip_ratio_high, loss_config.dual_clip,
                )
                is_response = batch.loss_mask.bool()
                for name, mask in masks.items():
                    totals[name] += int((mask & is_response).sum())
                self._record_loss_weights(micro, batch, masks, importance_weights)
        return totals

    def _record_loss_weights(self, micro, batch: TokenBatch, masks: dict[str, torch.Tensor],
                             importance_weights: torch.Tensor | None) -> None:
        """Each trained token's loss weight and flags, as the loss above used them, for the token records."""
        weights = batch.loss_mask if importance_weights is None else batch.loss_mask * importance_weights  # (B, K)
        flags = torch.zeros(batch.response_mask.shape, dtype=torch.uint8, device=weights.device)  # (B, K)
        if batch.context_mask is not None:
            flags |= batch.context_mask.to(torch.uint8) * token_records.IS_CONTEXT
        for name, bit in (("clip_low", token_records.IS_CLIPPED_LOW), ("clip_high", token_records.IS_CLIPPED_HIGH),
                          ("dual_clip", token_records.IS_DUAL_CLIPPED)):
            flags |= (masks[name] & batch.loss_mask.bool()).to(torch.uint8) * bit
        if importance_weights is not None:
            is_capped = importance_weights >= self.config.loss.behaviour_is_cap
            flags |= (is_capped & batch.loss_mask.bool()).to(torch.uint8) * token_records.IS_CAPPED
        for sequence, weight, flag in zip(micro, batch.per_sequence(weights), batch.per_sequence(flags)):
            self._loss_weights[id(sequence)] = (weight.float().cpu(), flag.cpu())

    def _token_records(self, sequences: Sequence[TrainingSequence], old: dict[int, torch.Tensor]) -> list:
        """This rank's share of the step's token records: every sequence it scored (advantage 0 too, weight 1
        where sampled, no clip: its loss is 0 whatever the ratio)."""
        records = []
        for sequence in sequences:
            if id(sequence) not in old:
                continue
            if id(sequence) in self._loss_weights:
                weights, flags = self._loss_weights[id(sequence)]
            else:
                is_context = (torch.as_tensor(list(sequence.context_mask), dtype=torch.bool)
                              if sequence.context_mask is not None else torch.zeros(len(sequence.response_ids), dtype=torch.bool))
                weights = (~is_context).float()
                flags = is_context.to(torch.uint8) * token_records.IS_CONTEXT
            records.append(token_records.TokenRecord(
                rollout_key=sequence.rollout_key, advantage=float(sequence.advantage),
                token_ids=list(sequence.response_ids),
                engine_logprobs=None if sequence.sampled_logprobs is None else list(sequence.sampled_logprobs),
                learner_logprobs=old[id(sequence)].float().cpu().numpy(),
                entropies=self._entropies[id(sequence)].numpy(),
                loss_weights=weights.numpy(), flags=flags.numpy(),
            ))
        return records

    def step(self, sequences: Sequence[TrainingSequence]) -> dict:
        """One batch: π_old first, then one AdamW step per mini-batch of prompts, gradients accumulated."""
        started = time.perf_counter()
        metrics = {
            "loss": 0.0, "grad_norm": 0.0, "grad_norm_max": 0.0, "optimizer_steps": 0, "skipped_steps": 0,
            "sequences": len(sequences), "trained_sequences": 0, "tokens": 0,
        }
        clip_counts = {"clip_low": 0, "clip_high": 0, "dual_clip": 0}
        self._entropies, self._loss_weights = {}, {}  # by id(sequence), for this step's token records
        batches = mini_batches(sequences, self.config.optimizer.mini_batch_prompts)
        old = self.old_logprobs(batches)
        metrics.update(train_inference_gap(sampled_only(old[id(s)], s) for s in sequences if id(s) in old))
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
        self.token_records = self._token_records(sequences, old)
        self._entropies, self._loss_weights = {}, {}
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
