"""Checkpoints that resume a run exactly, and their export as a Hugging Face model folder.

A checkpoint is a folder ``<output>/checkpoints/step_000005/``:

- ``model/``: a Hugging Face model folder (config, safetensors, tokenizer), so export is a copy;
- ``optimizer.pt``: AdamW's moments and step counts;
- ``trainer_state.pt``: step, the next event sequence number, the replay buffer, and every
  random number generator the run draws from (Python, NumPy, torch, and the driver's own);
- ``trainer_state.json``: the same step and sequence number, for people and the platform;
- ``run_config.json``: the resolved configuration of the run.

Beside the checkpoints, the run folder keeps two records a later attempt reads: the last event
number the run published (``last_event_seq.json``) and its evaluations (``evaluations.jsonl``).

Resuming reads the ``.pt`` files as data only (``load_plain_data``: PyTorch's weights-only unpickler,
admitting the trainer's own records by name) and the weights from safetensors, so a checkpoint on
the shared artifacts volume cannot run code in the trainer that resumes from it.

It is written to a temporary sibling folder and renamed into place only when complete,
so a run stopped mid-save (SIGTERM from Ray's stop_job) leaves no half-written checkpoint.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.recipe.problems import Problem
from trainer.recipe.rollouts import PromptSlot
from trainer.verification.verdicts import LeanMessage, Verdict, VerificationResult

CHECKPOINTS_FOLDER = "checkpoints"
STEP_FOLDER_PATTERN = re.compile(r"^step_(\d{6,})$")
MODEL_FOLDER = "model"


@dataclass
class TrainerState:
    """Everything besides weights and optimizer that the next step depends on."""

    step: int
    next_event_seq: int = 0
    replay_buffer: Any = None
    driver_rng_state: Any = None
    global_rng_states: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    verifier_state: Any = None  # the verdict cache and its counters (LeanVerifier.state_dict)


def checkpoint_folder(output_dir: str | os.PathLike, step: int) -> Path:
    return Path(output_dir) / CHECKPOINTS_FOLDER / f"step_{step:06d}"


def step_of(checkpoint_dir: str | os.PathLike) -> int | None:
    """The step a checkpoint folder is named for (``step_000020`` → 20), or None for another name."""
    match = STEP_FOLDER_PATTERN.match(Path(checkpoint_dir).name)
    return int(match.group(1)) if match else None


def checkpoint_steps(output_dir: str | os.PathLike) -> list[int]:
    """Steps of the complete checkpoints under ``output_dir``, in order."""
    folder = Path(output_dir) / CHECKPOINTS_FOLDER
    if not folder.is_dir():
        return []
    return sorted(step for child in folder.iterdir()
                  if (step := step_of(child)) is not None and (child / "trainer_state.pt").is_file())


def latest_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The complete checkpoint with the highest step under ``output_dir``, or None."""
    steps = checkpoint_steps(output_dir)
    return checkpoint_folder(output_dir, steps[-1]) if steps else None


def checkpoints_to_remove(steps: list[int], *, keep_last: int, keep: set[int]) -> list[int]:
    """Of the checkpoints at ``steps``, those outside the latest ``keep_last`` and outside ``keep``."""
    latest = set(sorted(steps)[-keep_last:])
    return [step for step in sorted(steps) if step not in latest and step not in keep]


def remove_checkpoint(output_dir: str | os.PathLike, step: int) -> None:
    """Delete one checkpoint: renamed out of the step pattern first, so that a crash halfway through never
    leaves a half-deleted folder that ``latest_checkpoint`` would take for a checkpoint."""
    folder = checkpoint_folder(output_dir, step)
    doomed = folder.with_name(f".removing-{folder.name}")
    folder.rename(doomed)
    shutil.rmtree(doomed)


def capture_global_rng_states() -> dict:
    import numpy
    import torch

    kind, keys, position, has_gauss, cached_gaussian = numpy.random.get_state()
    states = {
        "python": random.getstate(),
        # Plain ints, not an ndarray: a safe load (weights_only) refuses numpy's own pickles.
        "numpy": (kind, [int(key) for key in keys], position, has_gauss, cached_gaussian),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_global_rng_states(states: dict) -> None:
    import numpy
    import torch

    if "python" in states:
        random.setstate(states["python"])
    if "numpy" in states:
        kind, keys, *rest = states["numpy"]
        numpy.random.set_state((kind, numpy.asarray(keys, dtype=numpy.uint32), *rest))
    if "torch" in states:
        torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _full_state_dict_options(strict: bool = True):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # Full (unsharded) tensors on CPU: the same files whether the learner was sharded or not.
    return StateDictOptions(full_state_dict=True, cpu_offload=True, strict=strict)


def full_model_state_dict(model) -> dict:
    """The whole model's weights on CPU, by checkpoint name; a collective when sharded: every rank calls it,
    and rank 0 alone gets them (the others get an empty dict)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(model, options=_full_state_dict_options())


def is_checkpoint_writer() -> bool:
    import torch

    return not (torch.distributed.is_available() and torch.distributed.is_initialized()) or torch.distributed.get_rank() == 0


def save_checkpoint(
    output_dir: str | os.PathLike,
    model,
    optimizer,
    tokenizer,
    run_config_json: dict,
    state: TrainerState,
) -> Path:
    """Write the checkpoint of ``state.step`` atomically; returns its folder."""
    import torch
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    final = checkpoint_folder(output_dir, state.step)
    # Collective calls when sharded: every rank gathers, only rank 0 writes.
    model_state = full_model_state_dict(model)
    optimizer_state = get_optimizer_state_dict(model, optimizer, options=_full_state_dict_options())
    if not is_checkpoint_writer():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    needed = tensor_bytes(model_state) + tensor_bytes(optimizer_state) + _FILES_BESIDE_THE_TENSORS
    require_free_space(final.parent, needed, what=f"the checkpoint of step {state.step}")
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        model_folder = staging / MODEL_FOLDER
        unwrapped = getattr(model, "module", model)
        unwrapped.save_pretrained(model_folder, state_dict=model_state)
        if tokenizer is not None:
            tokenizer.save_pretrained(model_folder)
        torch.save(optimizer_state, staging / "optimizer.pt")
        torch.save(
            {
                "step": state.step,
                "next_event_seq": state.next_event_seq,
                "replay_buffer": state.replay_buffer,
                "driver_rng_state": state.driver_rng_state,
                "global_rng_states": state.global_rng_states or capture_global_rng_states(),
                "extra": state.extra,
                "verifier_state": state.verifier_state,
            },
            staging / "trainer_state.pt",
        )
        (staging / "trainer_state.json").write_text(
            json.dumps({"step": state.step, "next_event_seq": state.next_event_seq, **state.extra}, indent=2)
        )
        (staging / "run_config.json").write_text(json.dumps(run_config_json, indent=2))
        if final.exists():
            shutil.rmtree(final)  # a step saved again (e.g. the final save after a periodic one)
        os.replace(staging, final)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        # torch.save reports a full disk as "file write failed" / "unexpected pos": say what it was.
        if isinstance(error, (OSError, RuntimeError)):
            require_free_space(final.parent, needed, what=f"the checkpoint of step {state.step}", cause=error)
        raise
    return final


# The tokenizer, configs, trainer state and the zip containers' own records: a few MB for any model we train.
_FILES_BESIDE_THE_TENSORS = 64 * 1024**2


class NotEnoughDiskSpace(OSError):
    """A write that would not fit where it goes; the message says how much is missing and what to do."""

    def __init__(self, message: str):
        super().__init__(errno.ENOSPC, message)

    def __str__(self):
        return self.strerror


def tensor_bytes(value) -> int:
    """The bytes of every tensor in a (nested) state dict: what writing it puts on disk, give or take headers."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(tensor_bytes(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(item) for item in value)
    return 0


def require_free_space(folder: str | os.PathLike, needed_bytes: int, *, what: str, cause: BaseException | None = None):
    """Raise NotEnoughDiskSpace when ``folder``'s file system has less than ``needed_bytes`` free (after a failed
    write, the space freed by removing its partial files counts as free)."""
    free = shutil.disk_usage(folder).free
    if free >= needed_bytes:
        return
    message = (f"no room for {what} in {folder}: it needs about {_size(needed_bytes)} and {_size(free)} is free; "
               "free space there, or keep fewer checkpoints (schedule.keep_last_checkpoints)")
    raise NotEnoughDiskSpace(message) from cause


def _size(count: int) -> str:
    return f"{count / 1e9:.2f} GB" if count >= 1e9 else f"{count / 1e6:.1f} MB"


def load_checkpoint(checkpoint_dir: str | os.PathLike, model, optimizer=None) -> TrainerState:
    """Load weights (and optimizer state, if given) into the live objects; returns the rest."""
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    folder = Path(checkpoint_dir)
    if not (folder / "trainer_state.pt").is_file():
        raise FileNotFoundError(
            f"{str(folder)!r} is not a complete checkpoint (no trainer_state.pt); pass a folder such as "
            "<output>/checkpoints/step_000005, or resume to pick the latest one automatically"
        )
    weights = {}
    for shard in sorted((folder / MODEL_FOLDER).glob("*.safetensors")):
        weights.update(load_file(shard))
    result = set_model_state_dict(model, weights, options=_full_state_dict_options(strict=False))
    _check_only_tied_weights_missing(model, result.missing_keys, result.unexpected_keys, folder)
    _retie_weights(model)
    if optimizer is not None:
        optimizer_state = load_plain_data(folder / "optimizer.pt")
        set_optimizer_state_dict(model, optimizer, optimizer_state, options=_full_state_dict_options())
    saved = load_plain_data(folder / "trainer_state.pt")
    return TrainerState(
        step=saved["step"],
        next_event_seq=saved["next_event_seq"],
        replay_buffer=saved["replay_buffer"],
        driver_rng_state=saved["driver_rng_state"],
        global_rng_states=saved["global_rng_states"],
        extra=saved.get("extra", {}),
        verifier_state=saved.get("verifier_state"),
    )


def _checkpoint_data_classes() -> list:
    """The trainer's own records a checkpoint keeps (in-flight prompt slots, cached verdicts): plain fields, no code.

    Also under the names a checkpoint written before trainer/ was grouped into subpackages (issue 36) gives them.
    """
    return [Problem, PromptSlot, LeanMessage, Verdict, VerificationResult,
            (Problem, "trainer.problems.Problem"), (PromptSlot, "trainer.rollouts.PromptSlot")]


def load_plain_data(path: Path):
    """A checkpoint's ``.pt`` file as data: tensors, Python containers and the trainer's own records, nothing else.

    The artifacts volume is shared: whoever can write a checkpoint there must not be able to run code
    in the trainer that resumes from it, as a full unpickling (``weights_only=False``) would let them.
    Weights are never read from here: they load from the model folder's safetensors.
    """
    import pickle

    import torch

    try:
        with torch.serialization.safe_globals(_checkpoint_data_classes()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise ValueError(
            f"refusing to load {str(path)!r}: it holds more than tensors and plain data ({str(error).splitlines()[0]}), "
            "so loading it could run code. A checkpoint written before checkpoints became plain data (or one someone "
            "altered) cannot be resumed; start a new run from its weights instead (model.init_checkpoint set to the "
            "checkpoint's model folder, which loads only safetensors)"
        ) from None


def _tied_parameter_names(model) -> set[str]:
    """Names that share storage with an earlier parameter (e.g. lm_head tied to the embeddings)."""
    seen: dict[int, str] = {}
    tied = set()
    for name, parameter in getattr(model, "module", model).named_parameters(remove_duplicate=False):
        key = id(parameter)
        if key in seen:
            tied.add(name)
        else:
            seen[key] = name
    return tied


def _check_only_tied_weights_missing(model, missing, unexpected, folder: Path) -> None:
    tied = _tied_parameter_names(model)
    really_missing = sorted(set(missing) - tied)
    if really_missing or unexpected:
        raise ValueError(
            f"checkpoint {str(folder)!r} does not fit this model: missing {really_missing[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}; resume with the same model configuration it was saved with"
        )


def _retie_weights(model) -> None:
    unwrapped = getattr(model, "module", model)
    if hasattr(unwrapped, "tie_weights"):
        unwrapped.tie_weights()


def read_run_config_json(checkpoint_dir: str | os.PathLike) -> dict:
    return json.loads((Path(checkpoint_dir) / "run_config.json").read_text())


def export_hf(checkpoint_dir: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Write the checkpoint's policy as a Hugging Face model folder ``AutoModelForCausalLM`` loads."""
    source = Path(checkpoint_dir) / MODEL_FOLDER
    if not (source / "config.json").is_file():
        raise FileNotFoundError(
            f"{str(checkpoint_dir)!r} holds no model folder with a config.json; pass a checkpoint such as "
            "<output>/checkpoints/step_000005"
        )
    target = Path(out_dir)
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"export folder {str(target)!r} is not empty; choose a new folder or empty it first")
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.is_file():
            shutil.copy2(item, target / item.name)
    return target


# --- the run folder's records beside the checkpoints ------------------------------------------------

# Where a run's last published event number is kept, so that a resumed run numbers its events
# after everything the run it continues published (its checkpoint knows only up to the save).
LAST_EVENT_SEQ_FILE = "last_event_seq.json"


def first_event_seq_for_resume(output_dir: str | Path) -> int:
    """Where a resumed run's event numbers continue: after its checkpoint's, and after the last
    event the run it continues published (steps it ran past the checkpoint, its RUN_FINISHED),
    so that no number is used twice."""
    after_run = _read_last_event_seq(output_dir) + 1
    checkpoint = latest_checkpoint(output_dir)
    if checkpoint is None:
        return after_run
    saved = int(json.loads((checkpoint / "trainer_state.json").read_text()).get("next_event_seq", 0))
    return max(saved, after_run)


def record_last_event_seq(output_dir: str | Path, last_seq: int) -> None:
    """Keep the last number a run published beside its checkpoints (see first_event_seq_for_resume)."""
    output_dir = Path(output_dir)
    if last_seq < 0 or not output_dir.is_dir():
        return
    try:
        path = output_dir / LAST_EVENT_SEQ_FILE
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps({"last_event_seq": max(last_seq, _read_last_event_seq(output_dir))}))
        partial.replace(path)  # atomic: the next attempt never reads half a file
    except OSError:
        pass  # a courtesy for the next attempt's numbering; the run's outcome is already published


def _read_last_event_seq(output_dir: str | Path) -> int:
    """The last event number a run in ``output_dir`` published, or -1 if it never said."""
    try:
        return int(json.loads((Path(output_dir) / LAST_EVENT_SEQ_FILE).read_text())["last_event_seq"])
    except (OSError, ValueError, KeyError, TypeError):
        return -1


EVALUATIONS_FILE = "evaluations.jsonl"


def record_evaluation(output_dir: Path, step: int, values: dict) -> None:
    """Evaluations kept beside the checkpoints (a resumed run still knows which one was best)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    with (output_dir / EVALUATIONS_FILE).open("a") as file:
        file.write(json.dumps({"step": step, "values": values}) + "\n")


def best_evaluated_step(output_dir: Path, metric: str | None, steps: list[int]) -> int | None:
    """Among ``steps``, the one whose evaluation scored highest on ``metric`` (the latest of ties)."""
    if metric is None or not (output_dir / EVALUATIONS_FILE).is_file():
        return None
    scores = {}
    for line in (output_dir / EVALUATIONS_FILE).read_text().splitlines():
        row = json.loads(line)
        value = row.get("values", {}).get(metric)
        if row.get("step") in steps and isinstance(value, (int, float)):
            scores[row["step"]] = value
    return max(scores, key=lambda step: (scores[step], step)) if scores else None
