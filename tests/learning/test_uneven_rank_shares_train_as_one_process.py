"""Three learner ranks whose shares of a mini-batch are uneven update the policy as one process would.

Why the launch checks no longer ask for ``optimizer.mini_batch_prompts`` to be a multiple of the
learner ranks (trainer/ranks.py): each rank scales its share's Σ token losses / divisor by
release_micro / (mini-batch sequences / world size), the mini-batch's whole count, not its own
share's, and FSDP averages the ranks' gradients; Dr.GRPO's divisor is a constant. So the update
is release_micro / mini-batch sequences × ∇ Σ of every token loss however the sequences fall
over the ranks, and a rank with none runs zero-weighted placeholders to keep the passes equal.

The mini-batches below are the recipe's 32 prompts over verl's six learner GPUs in small:
2 prompts' groups over 3 ranks, 8 and then 7 sequences (a short retry group), 7 and then 2 of them
trained (zero advantages are left out), micro-batches of 2, so the ranks run 2, 1 and 1 passes and
in the second mini-batch one rank holds no sequence at all. Three processes on gloo (FSDP2 on CPU)
are compared with one process on the whole batch, at the tolerances of
tests/learning/test_data_parallel_training.py.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import torch

from deploy.services import free_port
from tests.learning.conftest import tiny_run_config
from trainer.learning.batching import TrainingSequence

WORLD_SIZE = 3
STEPS = 2


def learner_config(num_gpus: int):
    return tiny_run_config(
        rollout={"prompts_per_step": 4, "samples_per_prompt": 4, "max_response_tokens": 16},
        optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 2},
        cluster={"num_gpus": num_gpus},
    )


def batch() -> list[TrainingSequence]:
    """Four prompts' groups, two mini-batches: 8 sequences (7 trained), then 7 sequences (2 trained)."""
    groups = [
        ("p0", [0.75, -0.25, 0.75, -1.25]),
        ("p1", [0.5, 0.0, -0.5, 0.25]),
        ("p2", [0.0, 0.0, 0.0, 0.0]),           # every answer alike: nothing to learn from it
        ("p3-retry", [0.5, 0.0, -0.5]),          # a retry group of three: the mini-batch holds 7 sequences
    ]
    sequences = []
    for group_key, advantages in groups:
        for advantage in advantages:
            index = len(sequences)
            prompt = [100 + 7 * index + k for k in range(3 + index % 4)]
            response = [300 + 11 * index + k for k in range(2 + (5 * index) % 15)]
            sequences.append(TrainingSequence(prompt, response, advantage, group_key=group_key))
    return sequences


def train(learner) -> list[dict]:
    return [learner.step(batch()) for _ in range(STEPS)]


def rank_main(rank: int, port: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORLD_SIZE), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)  # three ranks share the machine's cores
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from trainer.learning.learner import Learner
    from trainer.learning.models import smollm2_tokenizer, tiny_random_policy
    from trainer.loop.distributed import combine_learner_metrics

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer()))
    learner = Learner(learner_config(WORLD_SIZE), model, tokenizer)
    assert learner.is_sharded
    per_step = train(learner)
    gathered: list = [None] * WORLD_SIZE
    torch.distributed.all_gather_object(gathered, per_step)
    weights = get_model_state_dict(learner.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        combined = [combine_learner_metrics([gathered[r][step] for r in range(WORLD_SIZE)]) for step in range(STEPS)]
        shares = [[gathered[r][step]["trained_sequences"] for r in range(WORLD_SIZE)] for step in range(STEPS)]
        torch.save({"metrics": combined, "shares": shares, "weights": weights}, Path(folder) / "three_ranks.pt")
    torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, smollm2_tokenizer_once):
    """(one process's metrics and weights, three ranks' combined metrics, per-rank shares and weights)."""
    from trainer.learning.learner import Learner
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    learner = Learner(learner_config(0), model, tokenizer)
    one_metrics = train(learner)
    one_weights = {name: tensor.detach().clone() for name, tensor in learner.model.state_dict().items()}
    folder = tmp_path_factory.mktemp("three_ranks")
    torch.multiprocessing.spawn(rank_main, args=(free_port(), str(folder)), nprocs=WORLD_SIZE, join=True)
    return (one_metrics, one_weights), torch.load(folder / "three_ranks.pt", weights_only=False)


def test_the_mini_batches_fall_unevenly_over_the_three_ranks(runs):
    _, three = runs
    # Both steps train the same batch: 7 trained sequences as 3 + 2 + 2, then 2 as 1 + 1 + 0, per step.
    assert three["shares"] == [[4, 3, 2], [4, 3, 2]]
    assert [m["trained_sequences"] for m in three["metrics"]] == [9, 9]


def test_three_uneven_ranks_report_the_loss_and_gradient_norm_of_one_process(runs):
    (one_metrics, _), three = runs
    for one, combined in zip(one_metrics, three["metrics"], strict=True):
        assert combined["loss"] == pytest.approx(one["loss"], rel=1e-5, abs=1e-9)
        assert combined["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-5)
        assert combined["optimizer_steps"] == one["optimizer_steps"] == 2
        assert combined["trained_sequences"] == one["trained_sequences"]
    assert one_metrics[0]["loss"] != 0.0  # a real update, not an empty one


def test_three_uneven_ranks_end_with_the_weights_of_one_process(runs, tiny_policy):
    (_, one_weights), three = runs
    for name, tensor in one_weights.items():
        # As in test_data_parallel_training.py: Adam divides by |gradient| + 1e-8, so where a gradient is that
        # small float summation order shows; 5e-5 is 5% of one step's movement at this learning rate (1e-3).
        torch.testing.assert_close(three["weights"][name], tensor, rtol=0, atol=5e-5, msg=name)
    initial, _ = tiny_policy(0)
    name = "model.layers.0.mlp.up_proj.weight"
    assert not torch.allclose(initial.state_dict()[name], one_weights[name], rtol=0, atol=5e-5)  # the update moved it
