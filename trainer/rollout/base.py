"""What every rollout engine takes and gives back, and the one place an engine is chosen.

An engine turns chat-templated prompts into sampled answers. It yields each answer as
soon as it is finished, so the caller can send it to Lean while the rest are still
being written. Between learner phases the engine can ``sleep`` (free its accelerator
memory) and must receive the learner's new weights through ``push_weights``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from trainer.compute_dtype import compute_dtype_of

if TYPE_CHECKING:
    from trainer.config import RolloutConfig, RunConfig, ScheduleConfig


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample: the same meaning in every engine.

    ``top_k = -1`` disables top-k and ``temperature = 0`` means greedy decoding, as in
    vLLM. ``seed`` makes a call reproducible on the same engine, hardware and batch;
    None leaves sampling to the engine's own random state.
    """

    n: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"SamplingSettings.n must be at least 1, got {self.n}; ask for one sample or more per prompt")
        if self.temperature < 0:
            raise ValueError(
                f"SamplingSettings.temperature must be ≥ 0, got {self.temperature}; use 0 for greedy decoding"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingSettings.top_p must be in (0, 1], got {self.top_p}; use 1.0 to turn it off")
        if self.top_k != -1 and self.top_k < 1:
            raise ValueError(f"SamplingSettings.top_k must be -1 (off) or ≥ 1, got {self.top_k}")
        if self.max_tokens < 1:
            raise ValueError(f"SamplingSettings.max_tokens must be at least 1, got {self.max_tokens}")

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0

    @classmethod
    def from_config(cls, rollout: RolloutConfig, seed: int | None) -> SamplingSettings:
        """Training rollouts: the GRPO group of ``samples_per_prompt`` answers per prompt."""
        return cls(
            n=rollout.samples_per_prompt,
            temperature=rollout.temperature,
            top_p=rollout.top_p,
            top_k=rollout.top_k,
            max_tokens=rollout.max_response_tokens,
            seed=seed,
        )

    @classmethod
    def for_evaluation(cls, schedule: ScheduleConfig, max_tokens: int, seed: int | None = None) -> SamplingSettings:
        """Evaluation: ``eval_samples`` answers per problem (the k of pass@k), the recipe's top-p 0.95."""
        return cls(
            n=schedule.eval_samples,
            temperature=schedule.eval_temperature,
            top_p=schedule.eval_top_p,
            top_k=-1,
            max_tokens=max_tokens,
            seed=seed,
        )

    @classmethod
    def greedy(cls, max_tokens: int) -> SamplingSettings:
        return cls(n=1, temperature=0.0, top_p=1.0, top_k=-1, max_tokens=max_tokens)


@dataclass(frozen=True)
class Generation:
    """One sampled answer.

    ``token_ids`` are the response's tokens only (never the prompt's); when the answer
    ended with an end-of-sequence token that token is the last id, because the learner
    must be trained to stop too. ``text`` is the decoded answer without special tokens.
    ``is_truncated`` is True when the answer hit ``max_tokens`` without ending.
    ``seconds`` counts from the start of the ``generate`` call to this answer's end.
    ``logprobs`` holds, for each of ``token_ids``, its log-probability under the distribution the
    engine drew it from: the logits over the temperature, then top-k and top-p, as vLLM's
    ``processed_logprobs``. With the training defaults (top-k and top-p off) that is exactly what
    the learner's π_old pass computes, so their difference is the train–inference gap
    (trainer/observability/gap.py); with top-p on, it also counts the nucleus's renormalisation.
    ``tool_calls`` (``rollout.lean_tool_calls``; trainer/rollout/lean_tool.py ``ToolCall``): the Lean checks the
    answer asked for; each reply's tokens are in ``token_ids`` (at ``reply_tokens``) but were never sampled, so
    their ``logprobs`` are placeholders and ``context_mask`` marks them.
    """

    prompt_index: int
    sample_index: int
    text: str
    token_ids: list[int]
    num_tokens: int
    is_truncated: bool
    seconds: float
    logprobs: list[float] | None = None
    tool_calls: tuple = ()

    @property
    def context_mask(self) -> list[bool] | None:
        """Per response token, True where it is context the engine did not sample (Lean's replies); None when none is."""
        if not self.tool_calls:
            return None
        mask = [False] * len(self.token_ids)
        for call in self.tool_calls:
            start, end = call.reply_tokens
            mask[start:end] = [True] * (end - start)
        return mask


@runtime_checkable
class RolloutEngine(Protocol):
    def generate(self, prompts: list[list[int]] | list[str], sampling: SamplingSettings,
                 progress: Any = None) -> Iterator[Generation]:
        """Yield ``len(prompts) * sampling.n`` generations, each as soon as it is finished.

        ``progress``, when given (trainer/observability/live.py ``LiveRollouts``), is told each unfinished answer's
        text as it is written: ``progress.update(prompt_index, sample_index, tokens, text_so_far)``.

        ``prompts`` are chat-templated prompts as token ids, exactly the ids the learner will
        score (the driver passes ``PromptSlot.prompt_ids``); text is accepted too and tokenized
        the learner's way (``add_special_tokens=False``). The order of yields is the order of finishing;
        ``prompt_index`` and ``sample_index`` say which prompt and sample each one is.
        """
        ...

    def sleep(self) -> None:
        """Free the accelerator memory the engine holds, before a learner phase."""
        ...

    def wake(self) -> None:
        """Take all the memory back (weights and cache); the driver needs only push_weights and generate, which wake what they use."""
        ...

    def push_weights(self, model: Any) -> None:
        """Make the engine sample from ``model``'s current weights (after each learner step)."""
        ...

    def close(self) -> None:
        ...


def rollout_dtype(config: RunConfig):
    """The precision rollouts compute in: ``model.dtype`` resolved for this machine (trainer/compute_dtype.py;
    the learner's master weights stay float32)."""
    return compute_dtype_of(config).torch_dtype()
