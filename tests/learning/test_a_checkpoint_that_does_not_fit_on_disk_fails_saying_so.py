"""A checkpoint that does not fit on its disk fails before a byte is written, saying how much it needs, how much is
free, where, and what to do; torch.save's own words for a full disk ("file write failed", "unexpected pos …") never
reach the run page alone.

The disk is real: a small tmpfs mounted for the test (the suite runs as root on its machines)."""

from __future__ import annotations

import os
import subprocess

import pytest
import torch

from tests.learning.conftest import tiny_run_config
from trainer.run.checkpoint import NotEnoughDiskSpace, TrainerState, require_free_space, save_checkpoint, tensor_bytes


@pytest.fixture
def small_disk(tmp_path):
    """A file system of 8 MiB, empty."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    assert mounted.returncode == 0, f"this test mounts a tmpfs and needs root: {mounted.stderr}"
    yield mount_point
    subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


def test_a_checkpoint_bigger_than_the_free_space_is_refused_before_writing(small_disk, tiny_policy):
    model, tokenizer = tiny_policy()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    output = small_disk / "run"
    with pytest.raises(NotEnoughDiskSpace) as refused:
        save_checkpoint(output, model, optimizer, tokenizer, tiny_run_config().to_json_dict(), TrainerState(step=5))
    message = str(refused.value)
    assert message.startswith(f"no room for the checkpoint of step 5 in {output / 'checkpoints'}: it needs about ")
    assert " MB is free" in message and "schedule.keep_last_checkpoints" in message
    assert refused.value.errno == 28
    assert os.listdir(output / "checkpoints") == []  # nothing half-written, no staging folder left


def test_a_write_that_fails_on_a_full_disk_is_reported_as_the_full_disk_it_was(small_disk):
    (small_disk / "filler").write_bytes(b"\0" * (8 * 1024**2 - 64 * 1024))
    weights = {"w": torch.zeros(256, 1024)}  # 1 MiB: more than is left
    with pytest.raises(RuntimeError) as torch_said:
        torch.save(weights, small_disk / "optimizer.pt")  # torch's own failure on a really full disk
    (small_disk / "optimizer.pt").unlink(missing_ok=True)
    with pytest.raises(NotEnoughDiskSpace) as refused:
        require_free_space(small_disk, tensor_bytes(weights), what="the optimizer", cause=torch_said.value)
    assert refused.value.__cause__ is torch_said.value
    assert str(refused.value).startswith(f"no room for the optimizer in {small_disk}: it needs about 1.0 MB and ")


def test_room_enough_passes_and_tensor_bytes_counts_nested_state():
    state = {"state": {0: {"exp_avg": torch.zeros(3, 4), "step": torch.tensor(1.0)}},
             "groups": [torch.zeros(2, 2, dtype=torch.bfloat16)]}
    assert tensor_bytes(state) == 3 * 4 * 4 + 4 + 2 * 2 * 2
    require_free_space(os.getcwd(), 1, what="one byte")
