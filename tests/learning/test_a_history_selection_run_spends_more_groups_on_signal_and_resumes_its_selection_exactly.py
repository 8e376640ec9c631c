"""``python -m trainer run --preset cpu-smoke --set data.selection=history`` on the smoke promptset (issue 47).

On that promptset two problems are always solved and one never (trainer/sft/smoke_model.py): their groups teach
nothing, and only smoke_rat_add's can. After the first pass over the promptset (every problem met once) a
history run has learnt which is which and skips the others before generation, so more of its groups have
signal than the same seed's uniform run's, and it says how many problems it skipped (``data/problems_skipped``).
A run stopped at a checkpoint and resumed draws, from then on, what the uninterrupted run drew.

Real runs: the trainer's own command, the cached smoke model, the stand-in Lean server on a loopback port.
Four samples a prompt, so that smoke_rat_add's group (norm_num passes, omega fails) nearly always has signal."""

from __future__ import annotations

import pytest

from tests.asynchronous.cpu_smoke_cli import run_cpu_smoke
from trainer.recipe.rollouts import group_key

pytestmark = pytest.mark.timeout(3600)

STEPS = 6
STOPPED_AT = 3
RUN_TIMEOUT_S = 1500  # one run, on a machine others share
FIRST_PASS_STEPS = 2  # 4 problems, 2 prompts a step
SETTINGS = ("rollout.samples_per_prompt=4", "schedule.seed=0")
WHOLE = (*SETTINGS, f"schedule.total_steps={STEPS}")


def metrics_by_step(events: list[dict]) -> dict[int, dict]:
    return {event["payload"]["step"]: event["payload"]["values"] for event in events if event["type"] == "metrics"}


def first_attempts_by_step(events: list[dict]) -> dict[int, list[str]]:
    """Each step's first-attempt problems, in slot order (one entry per slot)."""
    slots: dict[int, dict[str, str]] = {}
    for event in events:
        payload = event["payload"]
        if event["type"] == "rollout_finished" and not payload["is_evaluation"] and payload["turn"] == "first":
            slots.setdefault(payload["step"], {})[group_key(payload["rollout_key"])] = payload["problem_id"]
    return {step: [problem for _, problem in sorted(by_slot.items())] for step, by_slot in slots.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from trainer.verification.standin_server import StandinServerThread

    folder = tmp_path_factory.mktemp("selection")
    with StandinServerThread() as server:
        def run(name: str, *settings: str, resume: bool = False) -> list[dict]:
            return run_cpu_smoke(folder / name, server.url, *settings, resume=resume, timeout=RUN_TIMEOUT_S).events

        uniform = run("uniform", *WHOLE, "data.selection=uniform")
        history = run("history", *WHOLE, "data.selection=history")
        stopped = run("resumed", *SETTINGS, f"schedule.total_steps={STOPPED_AT}", "data.selection=history")
        resumed = run("resumed", *WHOLE, "data.selection=history", resume=True)
    return {"uniform": uniform, "history": history, "stopped": stopped, "resumed": resumed}


def signal_share_after_the_first_pass(events: list[dict]) -> float:
    after = [values["batch/groups_with_signal"] for step, values in metrics_by_step(events).items()
             if step > FIRST_PASS_STEPS]
    assert len(after) == STEPS - FIRST_PASS_STEPS and None not in after
    return sum(after) / len(after)


def test_after_the_first_pass_more_of_a_history_runs_groups_have_signal_than_the_uniform_runs(runs):
    history, uniform = signal_share_after_the_first_pass(runs["history"]), signal_share_after_the_first_pass(runs["uniform"])
    assert history > uniform, (history, uniform)


def test_a_history_run_counts_the_problems_it_skipped_and_a_uniform_run_skips_none(runs):
    history = metrics_by_step(runs["history"])
    uniform = metrics_by_step(runs["uniform"])
    assert all(values["data/problems_skipped"] == 0 for values in uniform.values())
    assert all(values["data/problems_skipped"] == 0 for step, values in history.items() if step <= FIRST_PASS_STEPS)
    assert sum(values["data/problems_skipped"] for values in history.values()) > 0


def test_a_resumed_history_run_draws_what_the_uninterrupted_run_drew(runs):
    stopped, resumed, whole = (metrics_by_step(runs[name]) for name in ("stopped", "resumed", "history"))
    assert sorted(stopped) == list(range(1, STOPPED_AT + 1)) and sorted(resumed) == list(range(STOPPED_AT + 1, STEPS + 1))
    assert [resumed[step]["data/problems_skipped"] for step in resumed] == [whole[step]["data/problems_skipped"]
                                                                           for step in resumed]
    drawn_whole = first_attempts_by_step(runs["history"])
    drawn_resumed = first_attempts_by_step(runs["resumed"])
    assert {step: drawn_resumed[step] for step in resumed} == {step: drawn_whole[step] for step in resumed}
    assert sum(whole[step]["data/problems_skipped"] for step in resumed) > 0  # the resumed part did skip
