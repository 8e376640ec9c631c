"""How a data-parallel run is launched: each rank's environment (torchrun's names, which the driver's rank actors
are given), start-up checks, and the platform's command."""

from __future__ import annotations

import shlex

import pytest

from tests.learning.conftest import tiny_run_config
from trainer.config import RunConfig
from trainer.ranks import (
    EngineGroups,
    RankPosition,
    check_launch_fits_config,
    check_world_fits_config,
    owned_slot_indices,
    rank_rule_problems,
    rollout_tensor_parallel_size,
    tensor_parallel_problem,
    torchrun_position,
)


def test_a_process_outside_torchrun_runs_alone():
    assert torchrun_position({}) is None
    assert torchrun_position({"WORLD_SIZE": "1", "RANK": "0"}) is None


def test_torchruns_environment_gives_this_processs_rank():
    environment = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"}
    assert torchrun_position(environment) == RankPosition(rank=3, world_size=4, local_rank=1)


def test_a_world_without_a_rank_is_refused_with_the_launch_command():
    with pytest.raises(ValueError, match="python -m trainer run"):
        torchrun_position({"WORLD_SIZE": "2"})


def test_a_multi_gpu_config_run_as_one_rank_is_refused_saying_the_driver_places_one_per_gpu():
    config = RunConfig.from_preset("h100x8")
    with pytest.raises(ValueError, match="places one learner-rank actor per learner GPU"):
        check_launch_fits_config(config, None)
    check_launch_fits_config(RunConfig.from_preset("cpu-demo"), None)  # one process, no GPU: fine


def test_the_number_of_ranks_must_be_the_configured_number_of_gpus():
    with pytest.raises(ValueError, match="one of 4 ranks but cluster.num_gpus is 8"):
        check_launch_fits_config(RunConfig.from_preset("h100x8"), RankPosition(0, 4, 0))


def test_a_mini_batch_that_does_not_split_evenly_over_the_ranks_is_accepted():
    # Uneven shares train exactly as one process: tests/learning/test_uneven_rank_shares_train_as_one_process.py.
    config = tiny_run_config(rollout={"prompts_per_step": 6, "samples_per_prompt": 3}, optimizer={"mini_batch_prompts": 3},
                             cluster={"num_gpus": 2})
    assert rank_rule_problems(config, 2) == []
    check_world_fits_config(config, 2)


def test_a_mini_batch_of_fewer_sequences_than_ranks_is_refused_with_sizes_that_give_each_rank_one():
    config = tiny_run_config(rollout={"prompts_per_step": 2, "samples_per_prompt": 2}, optimizer={"mini_batch_prompts": 1},
                             cluster={"num_gpus": 4})
    with pytest.raises(ValueError) as refusal:
        check_world_fits_config(config, 4)
    assert str(refusal.value) == (
        "optimizer.mini_batch_prompts (1) × rollout.samples_per_prompt (2) is 2 sequences per optimizer step, fewer "
        "than the 4 ranks that share each mini-batch's sequences: 2 of them would hold none in any mini-batch and only "
        "run zero-weighted placeholder passes; set optimizer.mini_batch_prompts to at least 2 (and "
        "rollout.prompts_per_step to a multiple of it), or rollout.samples_per_prompt to at least 4")
    check_world_fits_config(config.model_copy(update={"optimizer": config.optimizer.model_copy(
        update={"mini_batch_prompts": 2})}), 4)  # 2 prompts × 2 samples: one sequence for each of the 4 ranks


def test_vllm_engines_may_span_any_number_of_ranks_that_divides_the_world():
    for tensor_parallel in (1, 2, 4, 8):
        check_world_fits_config(RunConfig.from_preset("h100x8", {"rollout": {"vllm_tensor_parallel_size": tensor_parallel}}), 8)


def test_a_tensor_parallel_size_that_does_not_divide_the_ranks_is_refused_with_the_sizes_that_do():
    config = RunConfig.from_preset("h100x8", {"rollout": {"vllm_tensor_parallel_size": 3}})
    with pytest.raises(ValueError) as refusal:
        check_world_fits_config(config, 8)
    assert str(refusal.value) == (
        "rollout.vllm_tensor_parallel_size, the consecutive ranks each vLLM engine spans (one tensor-parallel shard "
        "on each), must divide the run's 8 ranks (one per GPU, cluster.num_gpus) but is 3; set it to one of "
        "1, 2, 4, 8, or cluster.num_gpus to a multiple of 3")
    assert rank_rule_problems(config, 8) == [("rollout.vllm_tensor_parallel_size", str(refusal.value))]


def test_the_engine_groups_refuse_a_tensor_parallel_size_with_the_launch_checks_message():
    with pytest.raises(ValueError) as refusal:
        EngineGroups(world_size=8, tensor_parallel_size=3)
    assert str(refusal.value) == tensor_parallel_problem(3, 8)
    # Never from a config (it refuses sizes below 1), but 8 % 0 would raise ZeroDivisionError instead.
    with pytest.raises(ValueError, match=r"must divide the run's 8 ranks .* but is 0; set it to one of 1, 2, 4, 8$"):
        EngineGroups(world_size=8, tensor_parallel_size=0)


def test_one_gpu_run_as_one_process_cannot_hold_a_tensor_parallel_engine():
    config = RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 1}, "rollout": {"vllm_tensor_parallel_size": 2}})
    with pytest.raises(ValueError, match=r"must divide the run's 1 rank \(.* but is 2; set it to one of 1, or cluster"):
        check_launch_fits_config(config, None)
    check_launch_fits_config(RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 1}}), None)


def test_the_mini_batch_rule_counts_every_rank_whatever_the_engines_span():
    # The learner shards each mini-batch over all ranks, so tensor parallelism does not relax it.
    config = tiny_run_config(rollout={"prompts_per_step": 4, "samples_per_prompt": 1, "engine": "vllm",
                                      "vllm_tensor_parallel_size": 2},
                             optimizer={"mini_batch_prompts": 2}, cluster={"num_gpus": 4})
    with pytest.raises(ValueError, match=r"is 2 sequences per optimizer step, fewer than the 4 ranks.*at least 4"):
        check_world_fits_config(config, 4)


def test_the_transformers_engine_never_shards_so_its_tensor_parallel_setting_is_not_a_rule():
    config = tiny_run_config(rollout={"vllm_tensor_parallel_size": 4}, cluster={"num_gpus": 2})
    assert rollout_tensor_parallel_size(config) == 1
    check_world_fits_config(config, 2)


def test_engines_span_consecutive_ranks_as_vllms_external_launcher_forms_its_groups():
    groups = EngineGroups(world_size=8, tensor_parallel_size=2)
    assert groups.count == 4
    assert groups.all_ranks() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [groups.engine_of(rank) for rank in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [groups.member_of(rank) for rank in range(8)] == [0, 1, 0, 1, 0, 1, 0, 1]


def test_the_ranks_of_an_engine_score_each_of_its_answers_exactly_once():
    groups = EngineGroups(world_size=4, tensor_parallel_size=2)
    answers = [(prompt, sample) for prompt in range(3) for sample in range(5)]
    scored_by = {answer: [rank for rank in groups.ranks_of(1) if groups.scores(rank, *answer, samples_per_prompt=5)]
                 for answer in answers}
    assert all(len(ranks) == 1 for ranks in scored_by.values())
    assert sum(1 for ranks in scored_by.values() if ranks == [2]) == 8  # 15 answers, shared 8 / 7
    assert all(EngineGroups(4, 1).scores(rank, 1, 4, 5) for rank in range(4))  # an engine of one rank scores all


def test_each_engine_rolls_out_every_engines_th_slot_and_together_all_of_them():
    shares = [owned_slot_indices(10, engine, 4) for engine in range(4)]
    assert shares[1] == [1, 5, 9]
    assert sorted(slot for share in shares for slot in share) == list(range(10))


def run_of(kind: str, num_gpus: int, attempt: int = 1):
    from runs.models import Run

    config = RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": num_gpus}}).to_json_dict()
    return Run(pk=7, kind=kind, attempt=attempt, config=config)  # unsaved: the entry point reads nothing stored


def test_the_platform_starts_a_multi_gpu_rl_run_as_its_driver_which_places_one_actor_per_gpu():
    from runs.ray_jobs import trainer_entrypoint

    argv = shlex.split(trainer_entrypoint(run_of("rl", 8, attempt=2)))
    assert argv[1:4] == ["-m", "trainer", "run"] and argv[-1] == "--resume"


def test_the_platform_starts_one_gpu_runs_and_sft_runs_as_one_process():
    from runs.ray_jobs import trainer_entrypoint

    assert shlex.split(trainer_entrypoint(run_of("rl", 1)))[1:4] == ["-m", "trainer", "run"]
    assert shlex.split(trainer_entrypoint(run_of("sft", 8)))[1:4] == ["-m", "trainer", "sft"]
    assert "--resume" not in shlex.split(trainer_entrypoint(run_of("rl", 8)))  # a first attempt starts afresh
