"""A checkpoint becomes a model repository (bfloat16 weights, a model card that claims only what was
measured) and a promptset version a dataset repository, pushed with huggingface_hub to a STAND-IN Hub
(tests/hub/hub_standin.py), since no machine here reaches the real one."""

from __future__ import annotations

import io
import json

import pytest
from safetensors.torch import load_file

from tests.hub.hub_standin import HubStandinThread
from trainer.__main__ import main as trainer_main
from trainer.verification.standin_server import StandinServerThread


@pytest.fixture(autouse=True)
def hub_reachable(monkeypatch):
    """The test suite runs with HF_HUB_OFFLINE=1 (the trainer must never reach a hub); pushing is the one
    deliberate online action, so these tests lift it, as an operator pushing from a shell would."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    promptset = folder / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}) + "\n")
    with StandinServerThread() as server:
        assert trainer_main(["run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--output",
                             str(folder / "out"), "--lean-url", server.url, "--set", "schedule.eval_every=2"]) == 0
    return folder / "out"


def test_a_checkpoint_becomes_a_bfloat16_model_repository_with_a_card(trained_run, tmp_path, capsys):
    assert trainer_main(["export", "--checkpoint", str(trained_run), "--out", str(tmp_path / "repo"), "--model-repo",
                         "--run-name", "smoke", "--promptset", "arith v1"]) == 0
    repo = tmp_path / "repo"
    tensors = load_file(repo / "model.safetensors")
    import torch

    assert {tensor.dtype for tensor in tensors.values() if tensor.is_floating_point()} == {torch.bfloat16}
    assert json.loads((repo / "config.json").read_text())["torch_dtype"] == "bfloat16"
    card = (repo / "README.md").read_text()
    assert card.startswith("---\nbase_model: tiny-smoke-llama\n")
    assert "step 2 of the platform run `smoke`" in card and "**Trained on**: arith v1" in card
    assert "| samples per prompt | `2` |" in card
    assert "| pass@1 |" in card  # evaluated at step 2: its figures, as the run recorded them
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(repo)
    assert model.dtype == torch.bfloat16


def test_a_checkpoint_folder_not_named_for_its_step_gets_a_card_that_claims_no_step(trained_run, tmp_path, capsys):
    import shutil

    copied = shutil.copytree(trained_run / "checkpoints" / "step_000002", tmp_path / "best")
    assert trainer_main(["export", "--checkpoint", str(copied), "--out", str(tmp_path / "repo"), "--model-repo",
                         "--run-name", "smoke"]) == 0
    card = (tmp_path / "repo" / "README.md").read_text()
    assert "a checkpoint of the platform run `smoke`" in card and "step 0" not in card
    assert "Not evaluated at this step: no figures are claimed." in card


def test_the_repository_is_pushed_whole_to_the_hub(trained_run, tmp_path, monkeypatch, capsys):
    with HubStandinThread(tmp_path / "hub") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", hub.app.token)
        code = trainer_main(["export", "--checkpoint", str(trained_run), "--out", str(tmp_path / "repo"),
                             "--push-to-hub", "lab/tiny-prover"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert hub.app.repos["models/lab/tiny-prover"]["private"] is True
    pushed = tmp_path / "hub" / "models" / "lab" / "tiny-prover"
    for file in (tmp_path / "repo").iterdir():
        assert (pushed / file.name).read_bytes() == file.read_bytes(), file.name
    assert "/commit/" in out.splitlines()[-1]


def test_a_refused_push_is_one_line(trained_run, tmp_path, monkeypatch, capsys):
    from trainer.command_line import EXIT_UNREACHABLE

    with HubStandinThread(tmp_path / "hub") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_wrong")
        code = trainer_main(["export", "--checkpoint", str(trained_run), "--out", str(tmp_path / "repo"),
                             "--push-to-hub", "lab/tiny-prover"])
    err = capsys.readouterr().err
    assert code == EXIT_UNREACHABLE and "--push-to-hub lab/tiny-prover" in err and "Traceback" not in err


@pytest.mark.django_db
def test_a_promptset_version_is_pushed_as_a_dataset_that_uploads_again(promptset_version, alice, tmp_path,
                                                                         monkeypatch):
    from django.core.management import call_command

    from promptsets.intake import FileCheck
    from promptsets.versions import import_promptset

    with HubStandinThread(tmp_path / "hub") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", hub.app.token)
        out = io.StringIO()
        call_command("push_promptset_to_hub", str(promptset_version.promptset_id), "1", "lab/arith", stdout=out)
    dataset = tmp_path / "hub" / "datasets" / "lab" / "arith"
    assert "data/train-*.parquet" in (dataset / "README.md").read_text()
    parquet = dataset / "data" / "train-00000-of-00001.parquet"
    with parquet.open("rb") as file:
        again = import_promptset(alice, "from the hub", FileCheck(file, filename=parquet.name))
    assert again.version.problem_count == 3
