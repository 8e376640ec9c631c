"""Rollouts with Hugging Face ``model.generate``: the CPU engine, and a single GPU without vLLM.

The engine samples from the learner's own module object, so ``push_weights`` has nothing
to copy: after an optimizer step the next ``generate`` already uses the new weights. That
is also why ``sleep`` and ``wake`` free nothing but the allocator's cache: the weights
belong to the learner, and the key/value cache lives only inside one ``generate`` call.

Answers are streamed: ``generate`` runs in a worker thread, and a stopping-criteria hook
sees every decoding step, so each sequence is handed over the moment it emits an
end-of-sequence token, while the rest of the batch keeps decoding.

Each answer carries the log-probability of every token it sampled under the distribution it was
drawn from (after the temperature, top-k and top-p, as vLLM's ``processed_logprobs``): the
sampling warpers are given to ``generate`` as logits processors of ours, in Hugging Face's own
order, with a recorder after them, because ``generate`` runs the processors it is given
*before* the warpers it builds itself from the generation config.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import torch
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from trainer.live import IncrementalDecoder
from trainer.rollout.base import Generation, SamplingSettings

_FINISHED = object()  # the worker thread's last word on the queue


class TransformersEngine:
    """Batched sampling on the learner's model; ``max_batch_sequences`` bounds one ``generate`` call's rows."""

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
        self._decoding: set[_FinishedSequenceWatcher] = set()  # the batches being decoded, for close()

    def generate(self, prompts: list[str] | list[list[int]], sampling: SamplingSettings,
                 progress: Any = None, tools: Any = None) -> Iterator[Generation]:
        """``prompts`` as token ids (the driver's), or text tokenized here as the learner does; ``progress``
        (trainer/live.py LiveRollouts) hears each unfinished answer's text at every decoding step.

        ``tools`` (trainer/rollout/lean_tool.py ``ToolCallSession``; ``rollout.lean_tool_calls``): an answer that
        asks Lean leaves its batch (the other rows go on decoding) while the snippet is checked; once the
        batches are done, the answers whose replies came resume together, one row each, until none waits."""
        started = time.perf_counter()
        prompts_per_batch = max(1, self._max_batch_sequences // sampling.n)
        for batch_number, first in enumerate(range(0, len(prompts), prompts_per_batch)):
            batch = prompts[first : first + prompts_per_batch]
            # Distinct seeds per batch, or every batch would draw the same random numbers.
            seed = None if sampling.seed is None else sampling.seed + batch_number
            yield from self._generate_batch(batch, first, sampling, seed, started, progress, tools)
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
        one_each = SamplingSettings(n=1, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                                    max_tokens=max(r.max_tokens for r in runnable), seed=seed)
        rows = [(r.prompt_index, r.sample_index, r.max_tokens, r.may_call) for r in runnable]
        yield from self._generate_batch([r.prefix_ids for r in runnable], 0, one_each, seed, started, progress, tools,
                                        rows=rows)

    def _left_padded(self, prompts: list[str] | list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """(P, T) token ids and attention mask, left-padded so every answer starts at the same column."""
        rows = [
            self._tokenizer(prompt, add_special_tokens=False)["input_ids"] if isinstance(prompt, str) else list(prompt)
            for prompt in prompts
        ]
        width = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), width), self._pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for index, row in enumerate(rows):
            if row:
                input_ids[index, width - len(row):] = torch.as_tensor(row, dtype=torch.long)
                attention_mask[index, width - len(row):] = 1
        return input_ids, attention_mask

    def _generate_batch(
        self, prompts: list[str] | list[list[int]], first_prompt_index: int, sampling: SamplingSettings, seed: int | None, started: float,
        progress: Any = None, tools: Any = None, rows: list[tuple[int, int, int, bool]] | None = None,
    ) -> Iterator[Generation]:
        """``rows`` (resumed answers): each row's (prompt index, sample index, token budget, whether it may call)."""
        device = _device_of(self._model)
        input_ids, attention_mask = self._left_padded(prompts)
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)  # (P, T_prompt)
        prompt_length = input_ids.shape[1]
        results: queue.Queue = queue.Queue()

        def answer_of(row: int) -> tuple[int, int]:
            if rows is not None:
                return rows[row][0], rows[row][1]
            prompt_index, sample_index = divmod(row, sampling.n)
            return first_prompt_index + prompt_index, sample_index

        def hand_over(row: int, response_ids: list[int], logprobs: list[float], is_truncated: bool) -> None:
            prompt_index, sample_index = answer_of(row)
            results.put(self._generation(prompt_index, sample_index, response_ids,
                                         logprobs, is_truncated, time.perf_counter() - started))

        recorder = _SampledDistribution()
        decoder = IncrementalDecoder(lambda ids: self._tokenizer.decode(ids, skip_special_tokens=True))

        def text_so_far(row: int, input_ids: torch.Tensor) -> str:
            written = decoder.text(row, input_ids[row, prompt_length:].tolist())
            return written if tools is None else tools.text_of(*answer_of(row), written)  # after its earlier segments

        def report_progress(input_ids: torch.Tensor) -> None:  # (B, T_prompt + t)
            tokens = input_ids.shape[1] - prompt_length
            for row in range(input_ids.shape[0]):
                if not watcher.has_finished(row):
                    prompt_index, sample_index = answer_of(row)
                    progress.update(prompt_index, sample_index, tokens, lambda row=row: text_so_far(row, input_ids))

        pauser = None
        if tools is not None:
            def pauser(row: int, response_ids: list[int]) -> bool:
                prompt_index, sample_index = answer_of(row)
                may_call = rows[row][3] if rows is not None else True
                if not may_call or ">" not in self._tokenizer.decode(response_ids[-1:]):
                    return False
                return tools.wants_pause(prompt_index, sample_index, response_ids)

            def pause(row: int, response_ids: list[int], logprobs: list[float]) -> None:
                results.put(("paused", row, response_ids, logprobs))

            budgets = [row[2] for row in rows] if rows is not None else None
        watcher = _FinishedSequenceWatcher(prompt_length, self._eos_token_ids, hand_over, recorder,
                                           report_progress if progress is not None else None)
        if pauser is not None:
            watcher.pause_when(pauser, pause, budgets)

        def decode_all() -> None:
            try:
                sequences = self._run_generate(input_ids, attention_mask, sampling, seed, watcher, recorder)  # (P*n, T)
                for row in range(sequences.shape[0]):
                    if not watcher.has_finished(row):
                        # No end-of-sequence token by the end: the budget ran out.
                        response_ids = sequences[row, prompt_length:].tolist()
                        hand_over(row, response_ids, watcher.logprobs_of(row, len(response_ids)), is_truncated=True)
                results.put(_FINISHED)
            except BaseException as error:  # noqa: BLE001 - re-raised in the consuming thread
                results.put(error)

        # Not a daemon: a daemon thread still inside a torch op when the interpreter finalizes is ended by
        # pthread_exit through C++ frames that cannot unwind (std::terminate: a cancelled run exits -6). The
        # interpreter waits for this one, which ends at the next decoding step once its batch is stopped.
        worker = threading.Thread(target=decode_all, name="transformers-rollout")
        self._decoding.add(watcher)
        try:
            worker.start()  # inside the try: a cancel may land while start() waits for the thread
            while (item := results.get()) is not _FINISHED:
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, tuple):  # ("paused", row, response ids, log-probabilities): Lean is asked
                    _, row, response_ids, logprobs = item
                    prompt_index, sample_index = answer_of(row)
                    tools.pause(prompt_index, sample_index, list(prompts[row // (1 if rows is not None else sampling.n)]),
                                response_ids, logprobs, f"p{prompt_index}-r{sample_index}")
                    continue
                yield item if tools is None else tools.finish(item)
        finally:
            watcher.stop_requested = True  # the caller stopped early: end the batch at the next step
            self._decoding.discard(watcher)
            if worker.is_alive():
                worker.join()

    def _run_generate(self, input_ids, attention_mask, sampling: SamplingSettings, seed: int | None, watcher, recorder):
        model = self._model
        generation_config = GenerationConfig(
            max_new_tokens=sampling.max_tokens,
            min_new_tokens=0,
            num_return_sequences=sampling.n,
            do_sample=not sampling.is_greedy,
            # Neutral here: the warpers come as our own processors (_sampling_processors), so the recorder sees their output.
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            repetition_penalty=1.0,
            num_beams=1,
            eos_token_id=self._eos_token_ids,
            pad_token_id=self._pad_token_id,
        )
        # generate() fills unset fields from model.generation_config (a checkpoint's min_p, say),
        # which would silently change the sampling distribution; hide it for the call.
        saved_generation_config = model.generation_config
        was_training = model.training
        model.generation_config = GenerationConfig(eos_token_id=self._eos_token_ids, pad_token_id=self._pad_token_id)
        model.eval()
        devices = [input_ids.device] if input_ids.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=devices, enabled=seed is not None), torch.inference_mode():
                if seed is not None:
                    torch.manual_seed(seed)
                prompt_cache = None
                if sampling.n > 1 and input_ids.shape[1] > 1:
                    # Each prompt is read once and its cache repeated for its n samples; generate()
                    # would otherwise read every prompt n times, most of a step's compute on a CPU.
                    prompt_cache = _prompt_cache(model, input_ids, attention_mask, sampling.n)
                    input_ids = input_ids.repeat_interleave(sampling.n, dim=0)
                    attention_mask = attention_mask.repeat_interleave(sampling.n, dim=0)
                    generation_config.num_return_sequences = 1
                return model.generate(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    past_key_values=prompt_cache,
                    generation_config=generation_config,
                    logits_processor=LogitsProcessorList([*_sampling_processors(sampling), recorder]),
                    stopping_criteria=StoppingCriteriaList([watcher]),
                )
        finally:
            model.generation_config = saved_generation_config
            model.train(was_training)

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
        for watcher in list(self._decoding):
            watcher.stop_requested = True
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


class _SampledDistribution(LogitsProcessor):
    """Last in the processor list: keeps this step's log-probabilities, those the next token is drawn from."""

    def __init__(self) -> None:
        self.logprobs: torch.Tensor | None = None  # (B, V)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.logprobs = torch.log_softmax(scores.float(), dim=-1)
        return scores


class _FinishedSequenceWatcher(StoppingCriteria):
    """Sees each decoding step, notes each row's sampled token's log-probability, and hands over every row
    that has just emitted end-of-sequence."""

    def __init__(self, prompt_length: int, eos_token_ids: list[int], hand_over, recorder: _SampledDistribution,
                 report_progress=None) -> None:
        self._prompt_length = prompt_length
        self._eos_token_ids = eos_token_ids
        self._hand_over = hand_over
        self._recorder = recorder
        self._report_progress = report_progress
        self._finished_rows: set[int] = set()
        self._logprobs: list[list[float]] = []  # per row, one per decoded token
        self.stop_requested = False
        self._pauser = None  # Lean inside the reasoning: (row, response ids) -> whether the row just asked Lean
        self._pause = None
        self._budgets: list[int] | None = None  # resumed rows: each its own token budget

    def pause_when(self, pauser, pause, budgets: list[int] | None) -> None:
        """Rows that ask Lean (``pauser``) leave the batch, handed to ``pause``; rows past their budget end."""
        self._pauser, self._pause, self._budgets = pauser, pause, budgets

    def has_finished(self, row: int) -> bool:
        return row in self._finished_rows

    def logprobs_of(self, row: int, tokens: int) -> list[float]:
        return self._logprobs[row][:tokens] if row < len(self._logprobs) else []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        # input_ids: (B, T_prompt + t); the last column was just drawn from the recorder's distribution.
        if self._recorder.logprobs is not None:
            drawn = self._recorder.logprobs.gather(1, input_ids[:, -1:]).squeeze(1).tolist()  # (B,)
            if not self._logprobs:
                self._logprobs = [[] for _ in drawn]
            for row_logprobs, value in zip(self._logprobs, drawn):
                row_logprobs.append(value)
        # A finished row is padded afterwards, possibly with the end-of-sequence id itself, so only
        # its first end-of-sequence token counts.
        just_ended = torch.isin(input_ids[:, -1], torch.tensor(self._eos_token_ids, device=input_ids.device))
        for row in just_ended.nonzero().flatten().tolist():
            if row not in self._finished_rows:
                self._finished_rows.add(row)
                response_ids = input_ids[row, self._prompt_length :].tolist()
                self._hand_over(row, response_ids, self.logprobs_of(row, len(response_ids)), False)
        if self._pauser is not None:
            return self._pause_rows(input_ids)
        if self._report_progress is not None:
            self._report_progress(input_ids)
        return torch.full((input_ids.shape[0],), self.stop_requested, dtype=torch.bool, device=input_ids.device)

    def _pause_rows(self, input_ids: torch.LongTensor) -> torch.BoolTensor:
        stops = torch.full((input_ids.shape[0],), self.stop_requested, dtype=torch.bool, device=input_ids.device)
        tokens = input_ids.shape[1] - self._prompt_length
        for row in range(input_ids.shape[0]):
            if row in self._finished_rows:
                stops[row] = True
                continue
            response_ids = input_ids[row, self._prompt_length:].tolist()
            if self._pauser(row, response_ids):
                self._finished_rows.add(row)
                self._pause(row, response_ids, self.logprobs_of(row, len(response_ids)))
                stops[row] = True
            elif self._budgets is not None and tokens >= self._budgets[row]:
                self._finished_rows.add(row)
                self._hand_over(row, response_ids, self.logprobs_of(row, len(response_ids)), True)
                stops[row] = True
        if self._report_progress is not None:
            self._report_progress(input_ids)
        return stops


def _prompt_cache(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, repeats: int):
    """The key/value cache of every prompt but its last token, each row repeated ``repeats`` times.

    generate() then feeds only the last prompt token, whose logits give the first sampled
    one. Positions follow the real tokens of the left-padded rows, as generate() numbers them.
    """
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    position_ids = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    model(
        input_ids=input_ids[:, :-1],
        attention_mask=attention_mask[:, :-1],
        position_ids=position_ids[:, :-1],
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    cache.batch_repeat_interleave(repeats)
    return cache


def _eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    ids: list[int] = []
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for candidate in [tokenizer.eos_token_id, *(configured if isinstance(configured, list) else [configured])]:
        if candidate is not None and candidate not in ids:
            ids.append(int(candidate))
    return ids


def _device_of(model: Any) -> torch.device:
    return next(model.parameters()).device
