"""Fixtures of the learner's tests: a tiny random Llama with SmolLM2's tokenizer, built in well under a second."""

from __future__ import annotations

import pytest

from trainer.config import RunConfig


def tiny_run_config(**overrides) -> RunConfig:
    """The cpu-demo preset on the tiny random model, with per-test overrides nested by section."""
    base = {
        "model": {"source": "tiny_random", "dtype": "float32", "gradient_checkpointing": False},
        "optimizer": {"learning_rate": 1e-3},
        "rollout": {"engine": "transformers"},  # the learner's tests; vLLM's are tests/rollout's
    }
    for section, values in overrides.items():
        base.setdefault(section, {}).update(values)
    return RunConfig.from_preset("cpu-demo", base)


@pytest.fixture(scope="session")
def smollm2_tokenizer_once():
    from trainer.learning.models import smollm2_tokenizer

    return smollm2_tokenizer()


@pytest.fixture
def tiny_policy(smollm2_tokenizer_once):
    """A fresh (model, tokenizer) pair; the same seed gives the same weights."""
    import copy

    from trainer.learning.models import tiny_random_policy

    def build(seed: int = 0):
        return tiny_random_policy(seed, tokenizer=copy.deepcopy(smollm2_tokenizer_once))

    return build


class FirstTokenRewardScorer:
    """Test double of RewardScorer: reward 1 when the answer starts with ``target_text``, else 0.

    A reward a tiny random model can learn to earn in a few steps; no Lean is involved, and
    every verdict says so.
    """

    def __init__(self, target_text: str):
        self.target_text = target_text
        self.calls = 0

    async def score(self, problem, response, num_tokens=None, max_tokens=None, *, key=None):
        from trainer.recipe.format_reward import FormatCheck
        from trainer.recipe.reward import ScoredResponse
        from trainer.verification.verdicts import Verdict, VerificationResult

        self.calls += 1
        is_hit = response.startswith(self.target_text)
        verdict = Verdict.VALID if is_hit else Verdict.LEAN_ERROR
        return ScoredResponse(
            reward=1.0 if is_hit else 0.0,
            format_check=FormatCheck(error=None, detail="test double: no format check"),
            verification=VerificationResult(verdict, reasons=("test double: first-token reward",)),
            reasons=[] if is_hit else ["test double: answer does not start with the target token"],
        )

    async def lean_validity(self, problem, response, scored, *, key):
        return scored.reward  # no format check here: the same as the reward


class CannedAnswersEngine:
    """Test double of a rollout engine: answers chosen by ``answer_for(prompt_text, sample_index)``.

    Lets a driver test reach the real scorer and the stand-in Lean server with answers in the
    recipe's shape, which a tiny random model would never write.
    """

    def __init__(self, tokenizer, answer_for):
        self.tokenizer = tokenizer
        self.answer_for = answer_for
        self.pushed_weights = 0

    def generate(self, prompts, sampling):
        from trainer.rollout.base import Generation

        for prompt_index, prompt in enumerate(prompts):
            # The driver sends token ids (what the learner scores); the canned answers read text.
            prompt_text = prompt if isinstance(prompt, str) else self.tokenizer.decode(prompt)
            for sample_index in range(sampling.n):
                text = self.answer_for(prompt_text, sample_index)
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
                yield Generation(prompt_index, sample_index, text, ids, len(ids), False, 0.0)

    def sleep(self):
        pass

    def wake(self):
        pass

    def push_weights(self, model):
        self.pushed_weights += 1

    def close(self):
        pass
