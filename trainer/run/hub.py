"""The Hugging Face Hub: a checkpoint as a model repository (bfloat16 weights, a generated model
card), and a folder pushed as a model or dataset repository.

Pushing needs a token with write access (``HF_TOKEN``) and the Hub's address (``HF_ENDPOINT``,
huggingface.co by default); nothing here runs during training, which keeps the Hub offline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainer.config import ModelSource
from trainer.run.checkpoint import EVALUATIONS_FILE, export_hf, read_run_config_json, step_of

MODEL_CARD = """---
base_model: {base_model}
library_name: transformers
pipeline_tag: text-generation
tags:
- lean4
- theorem-proving
- reinforcement-learning
- kimina-prover-rl
---

# {title}

A Lean 4 prover fine-tuned with reinforcement learning (Dr.GRPO) after the open
[Kimina-Prover-RL](https://github.com/project-numina/kimina-prover-rl) recipe: each answer is a
`<think>` block followed by one Lean 4 code block, rewarded only when the format is right and Lean
accepts the proof, with one error-correction turn.

- **Base model**: `{base_model}`
- **Trained on**: {promptset}
- **Checkpoint**: {checkpoint} of the platform run `{run_name}` (weights in bfloat16)
- **Verifier**: {verifier}

## Recipe settings

| setting | value |
| --- | --- |
{settings_rows}

## Evaluation

{evaluation}
"""

SETTINGS_SHOWN = (
    ("preset", "preset"),
    ("rollout.prompts_per_step", "prompts per step"),
    ("rollout.samples_per_prompt", "samples per prompt"),
    ("rollout.max_response_tokens", "max response tokens"),
    ("optimizer.learning_rate", "learning rate"),
    ("optimizer.mini_batch_prompts", "mini-batch prompts"),
    ("loss.clip_ratio_low", "clip ratio low"),
    ("loss.clip_ratio_high", "clip ratio high"),
    ("loss.dual_clip", "dual clip"),
    ("retry.enabled", "error-correction turn"),
    ("schedule.total_epochs", "total epochs"),
    ("schedule.total_steps", "total steps"),
)


def _setting(config: dict, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def model_card(config: dict, *, step: int | None, run_name: str, promptset: str, evaluation: dict | None,
               is_standin_verifier: bool) -> str:
    # A folder not named step_N says nothing of its step: the card claims none rather than a wrong one.
    checkpoint = f"step {step}" if step is not None else "a checkpoint"
    model = config.get("model", {})
    base_model = model.get("init_checkpoint") or model.get("name_or_path") or "unknown"
    if model.get("source") == ModelSource.TINY_SMOKE.value:
        # Its init_checkpoint is only where this machine caches it (trainer/sft/smoke_model.py); the name says what it is.
        base_model = model.get("name_or_path") or base_model
    rows = "\n".join(f"| {label} | `{_setting(config, dotted)}` |" for dotted, label in SETTINGS_SHOWN
                     if _setting(config, dotted) is not None)
    if evaluation:
        shown = {key: value for key, value in sorted(evaluation.items()) if isinstance(value, (int, float))}
        evaluation_text = (f"At {checkpoint}, on the run's evaluation problems:\n\n| metric | value |\n| --- | --- |\n"
                           + "\n".join(f"| {key} | {value:.4g} |" for key, value in shown.items()))
    else:
        evaluation_text = "Not evaluated at this step: no figures are claimed."
    verifier = ("the platform's stand-in Lean server (a small arithmetic fragment; not Lean itself)"
                if is_standin_verifier else "kimina-lean-server (Lean 4 with Mathlib)")
    return MODEL_CARD.format(base_model=base_model, title=f"{run_name}, {checkpoint}", promptset=promptset,
                             checkpoint=checkpoint, run_name=run_name, verifier=verifier, settings_rows=rows,
                             evaluation=evaluation_text)


def prepare_model_repo(checkpoint_dir: str | Path, out_dir: str | Path, *, run_name: str, promptset: str,
                       evaluation: dict | None = None, is_standin_verifier: bool = False) -> Path:
    """The checkpoint's policy as a model repository folder: bfloat16 safetensors and a model card."""
    import torch
    from safetensors.torch import load_file, save_file

    checkpoint_dir = Path(checkpoint_dir)
    folder = export_hf(checkpoint_dir, out_dir)
    for weights in folder.glob("*.safetensors"):
        tensors = load_file(weights)
        save_file({name: tensor.to(torch.bfloat16) if tensor.is_floating_point() else tensor
                   for name, tensor in tensors.items()}, weights, metadata={"format": "pt"})
    config_file = folder / "config.json"
    model_config = json.loads(config_file.read_text())
    model_config["torch_dtype"] = "bfloat16"
    model_config["dtype"] = "bfloat16"
    config_file.write_text(json.dumps(model_config, indent=2))
    run_config = read_run_config_json(checkpoint_dir)
    (folder / "README.md").write_text(model_card(run_config, step=step_of(checkpoint_dir), run_name=run_name, promptset=promptset,
                                                 evaluation=evaluation, is_standin_verifier=is_standin_verifier))
    return folder


def push_folder(folder: str | Path, repo_id: str, *, repo_type: str = "model", private: bool = True,
                token: str | None = None, endpoint: str | None = None, commit_message: str = "") -> str:
    """Create the repository if needed and commit the folder to it; returns the commit's URL."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token)
    api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
    commit = api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type=repo_type,
                               commit_message=commit_message or f"Upload from the Lean RL platform ({Path(folder).name})")
    return commit.commit_url


def evaluation_at(output_dir: Path, step: int) -> dict | None:
    """The evaluation the run recorded at ``step`` (trainer/loop/driver.py writes them beside the checkpoints)."""
    path = output_dir / EVALUATIONS_FILE
    if not path.is_file():
        return None
    found = None
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("step") == step:
            found = row.get("values")
    return found
