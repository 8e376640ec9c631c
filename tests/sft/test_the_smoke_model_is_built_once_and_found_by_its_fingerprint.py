"""model.source tiny_smoke (trainer/sft/smoke_model.py): built once by the trainer's SFT, then found by its fingerprint.

A recipe of one SFT step stands in for the real one here (its build takes minutes;
tests/rollout/test_smoke_answers_reach_lean_earn_rewards_and_become_retries.py runs on the real one); the build, the lock, the cache and the resolution a run makes are the real ones.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.config import RunConfig
from trainer.learning.models import TINY_RANDOM_SHAPE, load_policy
from trainer.sft.smoke_model import SmokeRecipe, build_smoke_model, smoke_model_build_dir, with_smoke_model

REPOSITORY = Path(__file__).resolve().parents[2]
ONE_STEP = SmokeRecipe(steps=1, warmup_steps=0)
BUILD = ("import sys; from trainer.sft.smoke_model import SmokeRecipe, build_smoke_model; "
         "print(build_smoke_model(sys.argv[1], SmokeRecipe(steps=1, warmup_steps=0)))")


def sft_runs_in(build_dir: Path) -> int:
    events = [json.loads(line) for line in (build_dir / "events.jsonl").read_text().splitlines()]
    return sum(event["type"] == "run_started" for event in events)


def test_two_processes_racing_for_it_train_it_once_and_both_get_the_folder(tmp_path):
    racers = [subprocess.Popen([sys.executable, "-c", BUILD, str(tmp_path)], cwd=REPOSITORY, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [racer.communicate(timeout=600) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], [error[-2000:] for _, error in outputs]
    folders = {output.strip().splitlines()[-1] for output, _ in outputs}
    assert folders == {str(smoke_model_build_dir(tmp_path, ONE_STEP) / "model")}
    assert sft_runs_in(smoke_model_build_dir(tmp_path, ONE_STEP)) == 1  # the second waited on the lock, then found it


def test_a_second_build_finds_it_and_trains_nothing(tmp_path):
    folder = build_smoke_model(tmp_path, ONE_STEP)
    written = (folder / "config.json").stat().st_mtime_ns
    assert build_smoke_model(tmp_path, ONE_STEP) == folder
    assert (folder / "config.json").stat().st_mtime_ns == written
    assert sft_runs_in(smoke_model_build_dir(tmp_path, ONE_STEP)) == 1


def test_a_changed_recipe_is_a_different_folder(tmp_path):
    assert smoke_model_build_dir(tmp_path, ONE_STEP) != smoke_model_build_dir(
        tmp_path, SmokeRecipe(steps=1, warmup_steps=0, learning_rate=3e-3))


def test_a_run_on_it_names_the_cached_folder_and_loads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("trainer.sft.smoke_model.SMOKE_RECIPE", ONE_STEP)
    config = RunConfig.from_preset("cpu-smoke")
    resolved = with_smoke_model(config)
    assert resolved.model.init_checkpoint == str(smoke_model_build_dir(tmp_path, ONE_STEP) / "model")
    model, _ = load_policy(resolved.model)
    assert model.config.hidden_size == TINY_RANDOM_SHAPE["hidden_size"]
    tiny_random = RunConfig.from_preset("cpu-smoke", {"model": {"source": "tiny_random"}})
    assert with_smoke_model(tiny_random) == tiny_random  # any other source: untouched


def test_without_its_folder_the_loader_says_how_to_get_one():
    config = RunConfig.from_preset("cpu-smoke")
    with pytest.raises(FileNotFoundError, match="python -m trainer.sft.smoke_model"):
        load_policy(config.model)
