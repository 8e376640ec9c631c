"""Rollouts on a Hugging Face causal LM, decoded by a loop of ours: the CPU engine, and a single GPU without vLLM.

The engine samples from the model object it is given (the learner's own, or trainer/rollout/replica.py's copy),
so ``push_weights`` has nothing to copy: after an optimizer step the next ``generate`` already uses the new
weights. That is also why ``sleep`` and ``wake`` free nothing but the allocator's cache: the weights belong to the
learner, and the key/value cache lives only inside one ``generate`` call.

Answers are streamed: ``generate`` is a generator that yields each answer at the decoding step it ends, while the
rest of the batch keeps decoding. Each answer carries the log-probability of every token it sampled under the
distribution it was drawn from (after the temperature, top-k and top-p, as vLLM's ``processed_logprobs``).

Why a loop of ours rather than ``model.generate`` (measured in benchmarks/generation_roofline.py and
docs/benchmarks/history.md): it decodes on the caller's thread (a second thread doing torch work gives the
process a second OpenMP team, and libgomp then throttles every team's spin-wait: 1.10–1.57× slower on two cores,
benchmarks/torch_off_the_main_thread.py); a token is drawn from one uniform number per answer over the distribution's running sum
(``torch.multinomial`` draws an exponential per vocabulary entry); finished and paused answers leave the batch;
and on a CPU, attention reads each key/value head once for the query heads that share it (``grouped_query_attention``)
where sdpa and eager copy the cache once per query head.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import AttentionInterface, LogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from trainer.observability.live import IncrementalDecoder
from trainer.rollout.base import Generation, SamplingSettings

GROUPED_QUERY_ATTENTION = "leanrl_grouped_query"


def grouped_query_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                            **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Attention as transformers' eager path computes it, with each key/value head read once by its query group.

    query (B, H, q, D), key and value (B, H_kv, T, D), an additive mask (B, 1, q, ≥T); returns (B, q, H, D).
    Query heads h·g … h·g + g − 1 share key/value head h (transformers' ``repeat_kv`` order), so the query is
    viewed as (B, H_kv, g·q, D) and the mask repeated g times along its query rows.
    """
    batch, heads, queries, size = query.shape
    groups = heads // key.shape[1]
    scores = torch.matmul(query.reshape(batch, key.shape[1], groups * queries, size), key.transpose(2, 3))
    scores = scores * (scaling if scaling is not None else size ** -0.5)
    if attention_mask is not None:
        mask = attention_mask[:, :, :, : key.shape[-2]]
        scores = scores + (mask.repeat(1, 1, groups, 1) if groups > 1 else mask)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    output = torch.matmul(weights, value).reshape(batch, heads, queries, size)
    return output.transpose(1, 2).contiguous(), None


AttentionInterface.register(GROUPED_QUERY_ATTENTION, grouped_query_attention)
AttentionMaskInterface.register(GROUPED_QUERY_ATTENTION, eager_mask)


@dataclass
class _Answer:
    """One row of a batch: which answer it is, what it may still write, and what it wrote."""

    prompt_index: int
    sample_index: int
    budget: int
    may_call: bool
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


class _Batch:
    """A batch being decoded; ``close()`` asks it to end at its next step."""

    stop_requested = False


class TransformersEngine:
    """Batched sampling on a Hugging Face model; ``max_batch_sequences`` bounds one batch's rows."""

    def __init__(self, model: Any, tokenizer: Any, max_batch_sequences: int = 64) -> None:
        if max_batch_sequences < 1:
            raise ValueError(f"max_batch_sequences must be at least 1, got {max_batch_sequences}")
        self._model = model
        self._tokenizer = tokenizer
        self._max_batch_sequences = max_batch_sequences
        self._eos_token_ids = _eos_token_ids(model, tokenizer)
        if not self._eos_token_ids:
            raise ValueError(
                "the tokenizer and the model's generation_config name no end-of-sequence token, so no answer "
                "could ever finish; set tokenizer.eos_token (e.g. '<|im_end|>' for chat models)"
            )
        pad = tokenizer.pad_token_id
        self._pad_token_id = pad if pad is not None else self._eos_token_ids[0]
        self._decoding: set[_Batch] = set()  # the batches being decoded, for close()

    def generate(self, prompts: list[str] | list[list[int]], sampling: SamplingSettings,
                 progress: Any = None, tools: Any = None) -> Iterator[Generation]:
        """``prompts`` as token ids (the driver's), or text tokenized here as the learner does; ``progress``
        (trainer/observability/live.py LiveRollouts) hears each unfinished answer's text at every decoding step.

        ``tools`` (trainer/rollout/lean_tool.py ``ToolCallSession``; ``rollout.lean_tool_calls``): an answer that
        asks Lean leaves its batch (the other rows go on decoding) while the snippet is checked; once the
        batches are done, the answers whose replies came resume together, one row each, until none waits."""
        started = time.perf_counter()
        prompts_per_batch = max(1, self._max_batch_sequences // sampling.n)
        for batch_number, first in enumerate(range(0, len(prompts), prompts_per_batch)):
            batch = [self._token_ids(prompt) for prompt in prompts[first : first + prompts_per_batch]]
            answers = [_Answer(first + index, sample, sampling.max_tokens, True, prompt_ids)
                       for index, prompt_ids in enumerate(batch) for sample in range(sampling.n)]
            # Distinct seeds per batch, or every batch would draw the same random numbers.
            seed = None if sampling.seed is None else sampling.seed + batch_number
            yield from self._decode(batch, sampling.n, answers, sampling, seed, started, progress, tools)
        wave = 0
        while tools is not None and tools.has_waiting():
            wave += 1
            resumptions = tools.ready(block=True)
            for first in range(0, len(resumptions), self._max_batch_sequences):
                batch = resumptions[first : first + self._max_batch_sequences]
                seed = None if sampling.seed is None else sampling.seed + 100_003 * wave + first
                yield from self._resume_batch(batch, sampling, seed, started, progress, tools)

    def _resume_batch(self, resumptions: list, sampling: SamplingSettings, seed: int | None, started: float,
                      progress: Any, tools: Any) -> Iterator[Generation]:
        """Paused answers, each its own row of one batch: prompt, response so far and Lean's reply as the prompt."""
        runnable = []
        for resumption in resumptions:
            if resumption.max_tokens <= 0:
                yield tools.out_of_room(resumption, time.perf_counter() - started)
            else:
                runnable.append(resumption)
        if not runnable:
            return
        answers = [_Answer(r.prompt_index, r.sample_index, r.max_tokens, r.may_call, list(r.prefix_ids)) for r in runnable]
        yield from self._decode([a.prompt_ids for a in answers], 1, answers, sampling, seed, started, progress, tools)

    def _token_ids(self, prompt: str | list[int]) -> list[int]:
        return self._tokenizer(prompt, add_special_tokens=False)["input_ids"] if isinstance(prompt, str) else list(prompt)

    def _left_padded(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """(P, T) token ids and attention mask, left-padded so every answer starts at the same column."""
        width = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), width), self._pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for index, row in enumerate(rows):
            if row:
                input_ids[index, width - len(row):] = torch.as_tensor(row, dtype=torch.long)
                attention_mask[index, width - len(row):] = 1
        return input_ids, attention_mask

    def _decode(self, prompts: list[list[int]], repeats: int, answers: list[_Answer], sampling: SamplingSettings,
                seed: int | None, started: float, progress: Any, tools: Any) -> Iterator[Generation]:
        """Decode ``answers`` (``repeats`` rows per prompt of ``prompts``, in order) until each ends, asks Lean or
        runs out of its budget, yielding each at the step it ends. Rows that end leave the batch."""
        model = self._model
        device = _device_of(model)
        generator = None if seed is None else torch.Generator(device=device).manual_seed(seed)
        processors = _sampling_processors(sampling)
        decoder = IncrementalDecoder(lambda ids: self._tokenizer.decode(ids, skip_special_tokens=True))
        batch = _Batch()
        self._decoding.add(batch)
        live = list(range(len(answers)))  # rows of the batch, as indices into answers
        try:
            with _decoding_mode(model, device):
                input_ids, attention_mask = self._left_padded(prompts)
                input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
                logits, cache = _prefill(model, input_ids, attention_mask, repeats)  # (rows, V)
                attention_mask = attention_mask.repeat_interleave(repeats, dim=0)
                positions = attention_mask.sum(dim=-1)  # (rows,) the next token's position in each answer
                while live and not batch.stop_requested:
                    drawn, logprobs = _draw(logits, processors, sampling.is_greedy, generator)
                    staying = []
                    for row, (answer_index, token, logprob) in enumerate(zip(live, drawn, logprobs)):
                        answer = answers[answer_index]
                        answer.response_ids.append(token)
                        answer.logprobs.append(logprob)
                        if token in self._eos_token_ids:
                            yield self._handed_over(answer, False, started, tools)
                        elif tools is not None and self._asks_lean(answer, tools):
                            tools.pause(answer.prompt_index, answer.sample_index, list(answer.prompt_ids),
                                        answer.response_ids, answer.logprobs,
                                        f"p{answer.prompt_index}-r{answer.sample_index}")
                        elif len(answer.response_ids) >= answer.budget:
                            yield self._handed_over(answer, True, started, tools)
                        else:
                            staying.append(row)
                    if not staying or batch.stop_requested:
                        live = [live[row] for row in staying]
                        break
                    if len(staying) < len(live):
                        kept = torch.tensor(staying, device=device)
                        cache.batch_select_indices(kept)
                        attention_mask, positions = attention_mask[kept], positions[kept]
                        live = [live[row] for row in staying]
                    if progress is not None:
                        self._report(progress, [answers[index] for index in live], decoder, tools)
                    next_ids = torch.tensor([answers[index].response_ids[-1] for index in live], device=device)
                    attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(live), 1))], dim=-1)
                    with torch.inference_mode():
                        logits = model(input_ids=next_ids[:, None], attention_mask=attention_mask,
                                       position_ids=positions[:, None], past_key_values=cache,
                                       use_cache=True).logits[:, -1]
                    positions = positions + 1
            for answer_index in live:  # stopped by close(): what each wrote so far, as run out of room
                yield self._handed_over(answers[answer_index], True, started, tools)
        finally:
            self._decoding.discard(batch)

    def _asks_lean(self, answer: _Answer, tools: Any) -> bool:
        if not answer.may_call or ">" not in self._tokenizer.decode(answer.response_ids[-1:]):
            return False
        return tools.wants_pause(answer.prompt_index, answer.sample_index, answer.response_ids)

    def _report(self, progress: Any, answers: list[_Answer], decoder: IncrementalDecoder, tools: Any) -> None:
        for answer in answers:
            def text_so_far(answer=answer) -> str:
                written = decoder.text((answer.prompt_index, answer.sample_index), answer.response_ids)
                return written if tools is None else tools.text_of(answer.prompt_index, answer.sample_index, written)
            progress.update(answer.prompt_index, answer.sample_index, len(answer.response_ids), text_so_far)

    def _handed_over(self, answer: _Answer, is_truncated: bool, started: float, tools: Any) -> Generation:
        generation = self._generation(answer.prompt_index, answer.sample_index, answer.response_ids, answer.logprobs,
                                      is_truncated, time.perf_counter() - started)
        return generation if tools is None else tools.finish(generation)

    def _generation(self, prompt_index: int, sample_index: int, response_ids: list[int], logprobs: list[float],
                    is_truncated: bool, seconds: float) -> Generation:
        return Generation(
            prompt_index=prompt_index,
            sample_index=sample_index,
            text=self._tokenizer.decode(response_ids, skip_special_tokens=True),
            token_ids=response_ids,
            num_tokens=len(response_ids),
            is_truncated=is_truncated,
            seconds=seconds,
            logprobs=logprobs,
        )

    def sleep(self) -> None:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def wake(self) -> None:
        pass

    def push_weights(self, model: Any) -> None:
        """Nothing to copy: this engine samples from the learner's own module (see the module's docstring)."""
        unwrapped = [model, getattr(model, "module", None), getattr(model, "_orig_mod", None)]
        if not any(candidate is self._model for candidate in unwrapped):
            raise ValueError(
                "TransformersEngine samples from the model object it was built with and cannot take weights "
                f"from another one (got a {type(model).__name__}); build the engine on the learner's model"
            )

    def close(self) -> None:
        """Ends the batches still decoding at their next step (their streams may never be read again: a cancel
        that left them), then frees the allocator's cache."""
        for batch in list(self._decoding):
            batch.stop_requested = True
        self.sleep()


def _sampling_processors(sampling: SamplingSettings) -> list[LogitsProcessor]:
    """Temperature, top-k, top-p: the warpers ``generate`` would build, in its order (none when greedy)."""
    if sampling.is_greedy:
        return []
    processors: list[LogitsProcessor] = []
    if sampling.temperature != 1.0:
        processors.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k != -1:
        processors.append(TopKLogitsWarper(top_k=sampling.top_k, min_tokens_to_keep=1))
    if sampling.top_p < 1.0:
        processors.append(TopPLogitsWarper(top_p=sampling.top_p, min_tokens_to_keep=1))
    return processors


def _draw(logits: torch.Tensor, processors: list[LogitsProcessor], greedy: bool,
          generator: torch.Generator | None) -> tuple[list[int], list[float]]:
    """Each row's next token and its log-probability under the processed distribution it is drawn from.

    Sampling inverts the distribution's running sum at one uniform number a row: the first token whose running sum
    exceeds it. A token the warpers removed adds nothing to the sum, so it is never the first to exceed it.
    """
    scores = logits.float()  # (rows, V)
    with torch.inference_mode():
        for processor in processors:
            scores = processor(None, scores)
        logprobs = torch.log_softmax(scores, dim=-1)
        if greedy:
            drawn = logprobs.argmax(dim=-1)
        else:
            running = logprobs.exp().cumsum(dim=-1)
            total = running[:, -1:]
            uniform = torch.rand(total.shape, generator=generator, device=total.device, dtype=total.dtype)
            target = torch.minimum(uniform * total, torch.nextafter(total, torch.zeros_like(total)))
            drawn = torch.searchsorted(running, target, right=True).squeeze(1)
        chosen = logprobs.gather(1, drawn[:, None]).squeeze(1)
    return drawn.tolist(), chosen.tolist()


@contextlib.contextmanager
def _decoding_mode(model: Any, device: torch.device):
    """The model in eval mode, and on a CPU with grouped-query attention, for the decode; as it was afterwards."""
    was_training = model.training
    implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
    grouped = device.type == "cpu" and implementation in ("sdpa", "eager") and hasattr(model, "set_attn_implementation")
    model.eval()
    if grouped:
        model.set_attn_implementation(GROUPED_QUERY_ATTENTION)
    try:
        yield
    finally:
        if grouped:
            model.set_attn_implementation(implementation)
        model.train(was_training)


def _prefill(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, repeats: int):
    """Each prompt read once: the next-token logits after it and its key/value cache, each row repeated ``repeats``
    times. Positions follow the real tokens of the left-padded rows."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                       past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1]
    if repeats > 1:
        cache.batch_repeat_interleave(repeats)
        logits = logits.repeat_interleave(repeats, dim=0)
    return logits, cache


def _eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    ids: list[int] = []
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for candidate in [tokenizer.eos_token_id, *(configured if isinstance(configured, list) else [configured])]:
        if candidate is not None and candidate not in ids:
            ids.append(int(candidate))
    return ids


def _device_of(model: Any) -> torch.device:
    return next(model.parameters()).device
