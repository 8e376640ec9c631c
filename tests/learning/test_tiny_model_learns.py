"""A tiny random model, trained by the real driver and learner, learns to earn a reward it can reach."""

from __future__ import annotations

import torch

from tests.learning.conftest import FirstTokenRewardScorer, tiny_run_config
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.recipe.problems import Problem
from trainer.recipe.prompts import first_attempt_messages, render_prompt

STEPS = 8
REQUIRED_RISE = 0.3  # mean reward of the last 3 steps over the first step's


def first_token_top2(model, tokenizer, problem) -> list[int]:
    text = render_prompt(tokenizer, first_attempt_messages(problem))
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model(ids).logits[0, -1].topk(2).indices.tolist()


def test_the_mean_reward_rises_by_at_least_0_3_within_8_steps_when_the_reward_is_learnable(tiny_policy, tmp_path):
    model, tokenizer = tiny_policy(seed=0)
    problems = [Problem(f"p{i}", f"theorem t{i} : ({i} : ℕ) + 1 = {i + 1} := by") for i in range(4)]
    # Sampling from the top 2 tokens: the untrained model's second choice is rewarded, so the
    # first step earns roughly a third and learning must move probability onto it.
    top2 = [first_token_top2(model, tokenizer, problem) for problem in problems]
    assert all(pair == top2[0] for pair in top2), "precondition: every prompt has the same two first-token candidates"
    target_text = tokenizer.decode([top2[0][1]])
    assert target_text.strip() and not tokenizer.decode([top2[0][0]]).startswith(target_text)

    config = tiny_run_config(
        rollout={"prompts_per_step": 4, "samples_per_prompt": 8, "max_response_tokens": 4, "top_k": 2},
        optimizer={"learning_rate": 5e-4, "mini_batch_prompts": 2, "micro_batch_sequences": 8},
        schedule={"total_steps": STEPS, "eval_every": 0, "checkpoint_every": 0},
    )
    sink = ListSink()
    status = TrainingRun(
        config, problems, tmp_path, EventPublisher("learns", sink),
        scorer=FirstTokenRewardScorer(target_text), model=model, tokenizer=tokenizer,
    ).run()

    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    rewards = [event.payload["values"]["reward/mean"] for event in sink.of_type(EventType.METRICS)]
    assert len(rewards) == STEPS
    last_three = sum(rewards[-3:]) / 3
    assert last_three >= rewards[0] + REQUIRED_RISE, rewards
