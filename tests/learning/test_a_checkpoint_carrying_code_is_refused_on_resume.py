"""Resuming reads a checkpoint as data: a pickled object that would run code is refused, never run.

Checkpoints live on the shared artifacts volume; whoever can write there must not run code in the
trainer that resumes. Weights load from safetensors; the optimizer and the trainer's state load
with PyTorch's weights-only unpickler, which admits tensors, plain containers and the trainer's
own records (prompt slots in flight, cached verdicts), nothing that calls a function.
"""

from __future__ import annotations

import random

import numpy
import pytest
import torch

from tests.learning.conftest import tiny_run_config
from trainer.recipe.problems import Problem
from trainer.recipe.rollouts import PromptSlot
from trainer.run.checkpoint import TrainerState, load_checkpoint, save_checkpoint
from trainer.verification.verdicts import LeanMessage, Verdict, VerificationResult


class Planted:
    """What an attacker would plant: unpickling it calls a function of their choice (here one that leaves
    evidence: it creates a file)."""

    def __init__(self, evidence):
        self.evidence = evidence

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.evidence),))


@pytest.fixture
def checkpoint(tmp_path, tiny_policy):
    model, tokenizer = tiny_policy()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    optimizer.step()
    problem = Problem("add", "theorem add : (2 : ℕ) + 3 = 5 := by")
    verdict = VerificationResult(Verdict.LEAN_ERROR, messages=(LeanMessage("error", "unsolved goals", 8, 44),),
                                 reasons=("Lean rejected the proof",))
    state = TrainerState(
        step=3, next_event_seq=17,
        driver_rng_state={"rng_state": random.Random(5).getstate(), "cursor": 1,
                          "in_flight": [(4, [PromptSlot(problem, [{"role": "user", "content": "x"}], "x", [1, 2])])]},
        verifier_state={"environment": "lean", "cache": [("key", verdict)], "counts": {"requests": 1}},
    )
    folder = save_checkpoint(tmp_path / "run", model, optimizer, tokenizer, tiny_run_config().to_json_dict(), state)
    return folder, model, optimizer


def test_a_checkpoint_written_by_the_trainer_resumes_with_its_records_intact(checkpoint, tiny_policy):
    folder, _, _ = checkpoint
    numpy_draw = numpy.random.rand()  # the state saved is the one before this draw
    model, _ = tiny_policy(seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    state = load_checkpoint(folder, model, optimizer)
    assert state.step == 3 and state.next_event_seq == 17
    (step, (slot,)), = state.driver_rng_state["in_flight"]
    assert step == 4 and slot.problem.problem_id == "add" and slot.prompt_ids == [1, 2]
    (key, verdict), = state.verifier_state["cache"]
    assert verdict.verdict is Verdict.LEAN_ERROR and verdict.messages[0].line == 8
    from trainer.run.checkpoint import restore_global_rng_states

    restore_global_rng_states(state.global_rng_states)
    assert numpy.random.rand() == numpy_draw
    assert optimizer.state_dict()["state"][0]["step"] == 1


@pytest.mark.parametrize("file_name", ["trainer_state.pt", "optimizer.pt"])
def test_a_checkpoint_file_carrying_a_pickled_call_is_refused_and_the_call_never_runs(checkpoint, tiny_policy,
                                                                                      tmp_path, file_name):
    folder, _, _ = checkpoint
    evidence = tmp_path / "the-planted-code-ran"
    saved = torch.load(folder / file_name, weights_only=False)  # the test's own file: it may read it fully
    saved["planted"] = Planted(evidence)
    torch.save(saved, folder / file_name)
    model, _ = tiny_policy(seed=1)
    with pytest.raises(ValueError, match=f"refusing to load .*{file_name}.*could run code"):
        load_checkpoint(folder, model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    assert not evidence.exists()
