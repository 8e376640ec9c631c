"""A checkpoint written before trainer/ was grouped into subpackages (issue 36) still loads as data.

Its ``trainer_state.pt`` names the trainer's records by the module paths of then: ``trainer.problems.Problem``
and ``trainer.rollouts.PromptSlot``, now trainer/recipe/problems.py and trainer/recipe/rollouts.py. The
weights-only unpickler admits them under both names, and under no other.
"""

from __future__ import annotations

import sys

import torch

from trainer.recipe import problems, rollouts
from trainer.recipe.problems import Problem
from trainer.recipe.rollouts import PromptSlot
from trainer.run.checkpoint import load_plain_data

STATEMENT = "theorem add : (2 : ℕ) + 3 = 5 := by"


def save_under_the_old_module_paths(data, path, monkeypatch):
    """torch.save as the trainer did before the move: pickle names each class by its ``__module__``."""
    with monkeypatch.context() as patch:
        patch.setattr(Problem, "__module__", "trainer.problems")
        patch.setattr(PromptSlot, "__module__", "trainer.rollouts")
        patch.setitem(sys.modules, "trainer.problems", problems)
        patch.setitem(sys.modules, "trainer.rollouts", rollouts)
        torch.save(data, path)


def test_a_prompt_slot_pickled_under_the_old_module_paths_loads_as_the_same_record(tmp_path, monkeypatch):
    problem = Problem(problem_id="p1", formal_statement=STATEMENT)
    slot = PromptSlot(problem=problem, messages=[{"role": "user", "content": "prove it"}], prompt_text="prove it",
                      prompt_ids=[1, 2, 3])
    path = tmp_path / "trainer_state.pt"
    save_under_the_old_module_paths({"in_flight": [slot]}, path, monkeypatch)
    assert b"trainer.problems" in _pickle_of(path) and b"trainer.rollouts" in _pickle_of(path)

    loaded = load_plain_data(path)

    assert loaded["in_flight"] == [slot]
    assert type(loaded["in_flight"][0].problem) is Problem


def _pickle_of(path) -> bytes:
    import zipfile

    with zipfile.ZipFile(path) as archive:
        return b"".join(archive.read(name) for name in archive.namelist() if name.endswith(".pkl"))
