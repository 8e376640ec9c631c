"""Warm-start supervised fine-tuning: a run of kind "sft", before RL.

The model learns the answer format from demonstrations (``trainer.sft.demonstrations``, or any
file of the same shape) with the RL run's own machinery: ``trainer.learning.models.load_policy``
loads it, ``trainer.learning.batching.token_batch`` and ``trainer.learning.token_logprobs.response_logprobs`` lay out (packed) and score the
tokens, ``trainer.run.checkpoint`` saves it, and typed events report it (a METRICS event per
optimizer step with ``sft_loss``), so the platform shows it like any run.

The loss is the mean negative log-likelihood of the assistant's tokens only (its
end-of-turn token included, so the model learns to stop); system and user tokens are
context, never targets. A conversation with several assistant turns gives one example per
turn, each conditioned on everything before it, rendered exactly as the RL prompt is.

Demonstrations file: JSON lines, each either ``{"messages": [{"role", "content"}, …]}``
or ``{"formal_statement": …, "response": …}`` (optionally ``informal_statement``,
``header``, ``problem_id``), which becomes the recipe's first-attempt prompt plus the answer.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainer.compute_dtype import resolve_compute_dtype
from trainer.config import RunConfig
from trainer.learning.models import load_policy
from trainer.observability.events import EventPublisher, EventType, RunStatus
from trainer.recipe.problems import Problem, json_lines
from trainer.recipe.prompts import check_messages, first_attempt_messages, render_prompt
from trainer.run.checkpoint import (
    MODEL_FOLDER,
    TrainerState,
    capture_global_rng_states,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from trainer.run.lifecycle import RunLifecycle

RUN_KIND = "sft"


@dataclass(frozen=True)
class SftExample:
    """One assistant turn to learn: its context's token ids and its own."""

    prompt_ids: list[int]
    completion_ids: list[int]  # the answer's tokens, then end-of-turn
    source: str  # "file:line#turn", for error messages


# --- reading demonstrations -------------------------------------------------------------------------


def conversation_from_row(row: dict, where: str) -> list[dict]:
    """The chat messages of one demonstrations row (either accepted shape)."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if "messages" in row:
        messages = row["messages"]
        if not isinstance(messages, list):
            raise ValueError(f"{where}: 'messages' must be a list of {{role, content}} objects, got {type(messages).__name__}")
        try:
            check_messages(messages)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if not any(message["role"] == "assistant" for message in messages):
            raise ValueError(f"{where}: no assistant message, so nothing to learn; add the answer as a message with role 'assistant'")
        return [{"role": message["role"], "content": message["content"]} for message in messages]
    if "formal_statement" in row and "response" in row:
        if not isinstance(row["response"], str) or not row["response"].strip():
            raise ValueError(f"{where}: 'response' must be a non-empty string, got {row['response']!r}")
        try:
            problem = Problem.from_dict({**row, "problem_id": str(row.get("problem_id") or where)})
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        return [*first_attempt_messages(problem), {"role": "assistant", "content": row["response"]}]
    raise ValueError(
        f"{where}: a row needs 'messages' (chat messages with an assistant turn) or 'formal_statement' and "
        f"'response'; it has {sorted(row)}"
    )


def load_demonstrations(path: str | Path) -> list[list[dict]]:
    """Conversations from a JSON-lines demonstrations file; blank lines are skipped."""
    path = Path(path)
    conversations = [conversation_from_row(row, where) for where, row in json_lines(path)]
    if not conversations:
        raise ValueError(f"{path} holds no demonstrations; give at least one JSON line")
    return conversations


def conversation_examples(tokenizer, messages: Sequence[dict], source: str = "") -> list[SftExample]:
    """One example per assistant turn: the rendered context as the RL prompt is, then the turn's tokens."""
    examples = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt_text = render_prompt(tokenizer, messages[:index])
        prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
        # The rollout engine stops at end-of-sequence and keeps that token: the same target here.
        completion_ids = tokenizer(message["content"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples.append(SftExample(list(prompt_ids), list(completion_ids), f"{source}#{index}"))
    return examples


def build_examples(tokenizer, conversations: Sequence[Sequence[dict]], max_sequence_tokens: int) -> tuple[list[SftExample], int]:
    """Every assistant turn as an example; those longer than ``max_sequence_tokens`` are dropped and counted."""
    examples, dropped = [], 0
    for number, messages in enumerate(conversations, 1):
        for example in conversation_examples(tokenizer, messages, source=f"demonstration {number}"):
            if len(example.prompt_ids) + len(example.completion_ids) > max_sequence_tokens:
                dropped += 1
            else:
                examples.append(example)
    return examples, dropped


def demonstrations_fingerprint(conversations: Sequence[Sequence[dict]]) -> str:
    """A short hash of the demonstrations, recorded with the checkpoint as part of its lineage."""
    return hashlib.sha256(json.dumps(conversations, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


# --- the objective ---------------------------------------------------------------------------------------


def assistant_token_nll(logprobs, mask, token_count: int):
    """Negative log-likelihood of the assistant tokens, summed and divided by ``token_count``.

    ``logprobs`` and ``mask`` are (B, R): the learner's per-token log-probs of the answer and
    1.0 where a real answer token sits. ``token_count`` is the answer tokens of the whole
    optimizer batch, so micro-batches add up to the batch's token mean. Returns a scalar.
    """
    if token_count <= 0:
        raise ValueError(f"token_count must be positive, got {token_count}; a batch needs at least one answer token")
    return -(logprobs * mask).sum() / token_count


def epoch_batches(examples: Sequence[SftExample], batch_size: int, epoch: int, seed: int) -> list[list[SftExample]]:
    """The examples of one epoch, shuffled by (seed, epoch) so a resumed run sees the same order."""
    order = list(range(len(examples)))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return [[examples[index] for index in order[start : start + batch_size]] for start in range(0, len(order), batch_size)]


# --- the run -----------------------------------------------------------------------------------------------


def sft_model_folder(output_dir: str | Path) -> Path | None:
    """The Hugging Face model folder of an SFT run's latest checkpoint: what ``model.init_checkpoint`` takes."""
    checkpoint = latest_checkpoint(output_dir)
    return None if checkpoint is None else checkpoint / MODEL_FOLDER


class SupervisedFineTuning(RunLifecycle):
    """An SFT run from start (or its latest checkpoint) to RUN_FINISHED (trainer/run/lifecycle.py)."""

    def __init__(
        self,
        config: RunConfig,
        conversations: Sequence[Sequence[dict]],
        output_dir: str | Path,
        publisher: EventPublisher,
        *,
        model=None,
        tokenizer=None,
        resume: bool = False,
        install_signal_handlers: bool = True,
        on_step: Callable[[int, int, dict], None] | None = None,
    ):
        if not conversations:
            raise ValueError("no demonstrations to fine-tune on; give a file with at least one")
        self.config = config
        self.conversations = [list(messages) for messages in conversations]
        self.output_dir = Path(output_dir)
        self.publisher = publisher
        self._seq_recorder = publisher.record_sequence()
        self.model = model
        self.tokenizer = tokenizer
        self.should_resume = resume
        self.install_signal_handlers = install_signal_handlers
        self.on_step = on_step
        self.step = 0
        self.total_steps = 0
        self.examples: list[SftExample] = []
        self.optimizer = None
        self.device = None
        self.compute_dtype = None  # model.dtype resolved on this machine, in set_up
        self.lineage = {}

    def live(self) -> None:
        """Fine-tune for ``sft.epochs``."""
        self.set_up()
        self.publisher.publish(EventType.RUN_STARTED, {
            "step": self.step, "kind": RUN_KIND, "config": self.config.to_public_dict(),
            "demonstrations": len(self.conversations), "examples": len(self.examples),
            "total_steps": self.total_steps, "resumed_from_step": self.step or None, "lineage": self.lineage,
            "compute_dtype": self.compute_dtype.to_json_dict(),
        })
        if self.compute_dtype.warning:
            self.publisher.log(self.compute_dtype.warning, "warning")
        self.train()

    def finished_payload(self, status: RunStatus) -> dict:
        model_folder = sft_model_folder(self.output_dir) if status is RunStatus.SUCCEEDED else None
        return {"kind": RUN_KIND, "model_path": str(model_folder) if model_folder else None}

    def set_up(self) -> None:
        import torch

        sft = self.config.sft
        if self.model is None:
            self.model, self.tokenizer = load_policy(self.config.model, seed=self.config.schedule.seed)
        from trainer.learning.token_logprobs import check_model_supports_chunked_logprobs

        check_model_supports_chunked_logprobs(self.model)
        self.examples, dropped = build_examples(self.tokenizer, self.conversations, sft.max_sequence_tokens)
        if not self.examples:
            raise ValueError(
                f"every demonstration is longer than sft.max_sequence_tokens ({sft.max_sequence_tokens} tokens); "
                "raise it or shorten the demonstrations"
            )
        if dropped:
            self.publisher.log(
                f"dropped {dropped} assistant turn(s) longer than sft.max_sequence_tokens ({sft.max_sequence_tokens})",
                "warning",
            )
        self.total_steps = sft.epochs * math.ceil(len(self.examples) / sft.batch_sequences)
        # Without CUDA, num_gpus > 0 got here only as a named CPU stand-in (check_cuda_for_gpus refused the rest).
        use_gpu = self.config.cluster.num_gpus > 0 and torch.cuda.is_available()
        self.device = torch.device("cuda") if use_gpu else torch.device("cpu")
        self.compute_dtype = resolve_compute_dtype(self.config.model.dtype, self.device.type)
        self.model.to(self.device)
        if self.config.model.gradient_checkpointing and hasattr(self.model, "gradient_checkpointing_enable"):
            self.model.gradient_checkpointing_enable()
        self.model.train()
        from trainer.learning.learner import adamw

        self.optimizer = adamw(self.model.parameters(), self.device, is_sharded=False, lr=sft.learning_rate,
                               weight_decay=self.config.optimizer.weight_decay, betas=tuple(self.config.optimizer.betas))
        self.lineage = {
            "kind": RUN_KIND,
            "base_model": self.config.model.init_checkpoint or self.config.model.name_or_path,
            "base_model_source": self.config.model.source.value,
            "demonstrations_sha256": demonstrations_fingerprint(self.conversations),
            "demonstrations": len(self.conversations),
        }
        if self.should_resume:
            checkpoint = latest_checkpoint(self.output_dir)
            if checkpoint is None:
                self.publisher.log(f"--resume: no checkpoint under {self.output_dir}; starting from step 0", "warning")
            else:
                self.step = load_checkpoint(checkpoint, self.model, self.optimizer).step
                self.publisher.log(f"resumed from {checkpoint} at step {self.step}")

    def _autocast(self):
        import torch

        is_enabled = self.compute_dtype.dtype == "bfloat16"
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=is_enabled)

    def train(self) -> None:
        sft = self.config.sft
        batches_per_epoch = math.ceil(len(self.examples) / sft.batch_sequences)
        while self.step < self.total_steps:
            epoch, index_in_epoch = divmod(self.step, batches_per_epoch)
            batch = epoch_batches(self.examples, sft.batch_sequences, epoch, self.config.schedule.seed)[index_in_epoch]
            self.step += 1
            values = self.train_step(batch)
            values["epoch"] = epoch + 1
            self.publisher.publish(EventType.METRICS, {"step": self.step, "values": values})
            if self.on_step is not None:
                self.on_step(self.step, self.total_steps, values)
            if sft.checkpoint_every and self.step % sft.checkpoint_every == 0 and self.step < self.total_steps:
                self.save_checkpoint()
        self.save_checkpoint()  # the last step is always kept: it is the model RL starts from

    def train_step(self, batch: Sequence[SftExample]) -> dict:
        """One optimizer step on ``batch``, gradients accumulated over micro-batches."""
        import torch

        from trainer.learning.batching import TrainingSequence, chunks, supports_packing, token_batch
        from trainer.learning.learner import learning_rate_at
        from trainer.learning.token_logprobs import response_logprobs

        started = time.perf_counter()
        learning_rate = learning_rate_at(self.step, self.config.sft.learning_rate, self.config.sft.warmup_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate
        pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        token_count = sum(len(example.completion_ids) for example in batch)
        self.optimizer.zero_grad(set_to_none=True)
        total_loss = 0.0
        for micro in chunks(list(batch), self.config.sft.micro_batch_sequences):
            # The RL learner's layouts (packed where the model keeps sequences apart); the advantage is unused here.
            sequences = [TrainingSequence(example.prompt_ids, example.completion_ids, 0.0) for example in micro]
            tokens = token_batch(sequences, pad_token_id, self.device, packed=supports_packing(self.model))
            with self._autocast():
                logprobs = response_logprobs(self.model, tokens, 1.0, self.config.optimizer.logprob_chunk_tokens)  # (B, K)
            loss = assistant_token_nll(logprobs, tokens.response_mask, token_count)
            loss.backward()
            total_loss += loss.item()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optimizer.grad_clip))
        if math.isfinite(grad_norm):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - started
        return {
            "sft_loss": total_loss,
            "tokens_per_second": token_count / seconds if token_count and seconds > 0 else None,
            "tokens": token_count,
            "sequences": len(batch),
            "learning_rate": learning_rate,
            "grad_norm": grad_norm,
            "is_update_skipped": not math.isfinite(grad_norm),
            "seconds": seconds,
            "total_steps": self.total_steps,
        }

    def save_checkpoint(self) -> Path:
        state = TrainerState(
            step=self.step,
            next_event_seq=self._seq_recorder.last_seq + 2,  # the CHECKPOINT_SAVED event takes the next one
            global_rng_states=capture_global_rng_states(),
            extra={"lineage": self.lineage},
        )
        folder = save_checkpoint(self.output_dir, self.model, self.optimizer, self.tokenizer, self.config.to_json_dict(), state)
        self.publisher.publish(EventType.CHECKPOINT_SAVED, {"step": self.step, "path": str(folder), "kind": RUN_KIND})
        return folder
