"""η's bounds per preset and the two GPU pools (trainer/staleness.py): refused at every launch path, saying why.

The platform's launch check (trainer/memory/memory_fit.py, under the form and the API: tests/runs/
test_launch_refuses_asynchronous_layouts_on_the_field.py), ``python -m trainer run`` (here) and
``python -m trainer memory-plan`` refuse with the same sentence.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.__main__ import main as trainer_main
from trainer.config import RunConfig
from trainer.memory import memory_fit
from trainer.ranks import check_launch_fits_config, check_world_fits_config, rank_rule_problems
from trainer.staleness import (
    STALENESS_BOUNDS,
    asynchronous_layout_problem,
    asynchronous_layout_refusal,
    learner_gpus,
    staleness_bound,
)

ROOT = Path(__file__).resolve().parents[2]


def h100x8(staleness: int = 0, **cluster) -> RunConfig:
    return RunConfig.from_preset("h100x8", {"rollout": {"max_staleness": staleness}, "cluster": cluster})


def test_every_preset_defaults_to_the_synchronous_loop_within_its_bound():
    for preset, bound in STALENESS_BOUNDS.items():
        config = RunConfig.from_preset(preset)
        assert config.rollout.max_staleness == 0 and config.cluster.rollout_gpus == 0
        assert 1 <= bound <= 8  # within the config field's own limit
        assert asynchronous_layout_problem(config) is None


def test_h100x8_allows_eta_up_to_2_and_the_cpu_presets_the_same():
    assert (staleness_bound("h100x8"), staleness_bound("cpu-demo"), staleness_bound("cpu-smoke")) == (2, 2, 2)


def test_a_preset_without_a_bound_runs_synchronously_only():
    assert staleness_bound("some-preset-an-administrator-added") == 0


def test_eta_above_the_presets_bound_is_refused_with_the_range_to_set():
    assert asynchronous_layout_refusal(h100x8(3, rollout_gpus=2)) == (
        "rollout.max_staleness",
        "rollout.max_staleness (η) is 3, above the h100x8 preset's bound of 2: a batch trained 3 updates after the "
        "weights that wrote it is further off-policy than this preset's learning rate and batch were sized for; set "
        "rollout.max_staleness to 0 to 2")
    cpu = RunConfig.from_preset("cpu-smoke", {"rollout": {"max_staleness": 3}})
    assert "above the cpu-smoke preset's bound of 2" in asynchronous_layout_problem(cpu)


def test_the_bound_of_the_preset_given_applies_over_the_configs_own():
    config = RunConfig.from_preset("cpu-demo", {"rollout": {"max_staleness": 1}})
    assert asynchronous_layout_problem(config) is None
    assert "preset's bound of 0" in asynchronous_layout_problem(config, "unbounded-preset")
    assert "set rollout.max_staleness to 0 (this preset runs synchronously only)" in asynchronous_layout_problem(
        config, "unbounded-preset")


def test_an_asynchronous_cpu_run_needs_no_pool_and_refuses_one():
    assert asynchronous_layout_problem(RunConfig.from_preset("cpu-smoke", {"rollout": {"max_staleness": 2}})) is None
    refusal = asynchronous_layout_refusal(RunConfig.from_preset(
        "cpu-smoke", {"rollout": {"max_staleness": 1}, "cluster": {"rollout_gpus": 1}}))
    assert refusal.config_field == "cluster.rollout_gpus"
    assert refusal.message.startswith("cluster.rollout_gpus is 1 but the run has no GPUs (cluster.num_gpus 0)")
    assert refusal.message.endswith("set cluster.rollout_gpus to 0")


def test_a_rollout_pool_under_the_synchronous_loop_is_refused_because_it_would_sit_idle():
    assert asynchronous_layout_refusal(h100x8(0, rollout_gpus=2)) == (
        "cluster.rollout_gpus",
        "cluster.rollout_gpus is 2 but rollout.max_staleness (η) is 0: the synchronous loop generates and learns on "
        "the same GPUs one after the other, so a rollout pool would sit idle through every learner step; set "
        "cluster.rollout_gpus to 0, or rollout.max_staleness to 1 or 2 to generate there while the learner trains")


def test_an_asynchronous_run_on_one_gpu_is_refused():
    refusal = asynchronous_layout_refusal(h100x8(1, num_gpus=1))
    assert refusal.config_field == "rollout.max_staleness"
    assert "cluster.num_gpus is 1: one GPU cannot be both; use at least 2 GPUs" in refusal.message
    assert "or set rollout.max_staleness to 0" in refusal.message


def test_an_asynchronous_gpu_run_without_a_rollout_pool_is_refused_with_the_pools_range():
    assert asynchronous_layout_refusal(h100x8(1)) == (
        "cluster.rollout_gpus",
        "an asynchronous run (rollout.max_staleness 1) generates on a pool of rollout GPUs while the learner trains "
        "on the others, and cluster.rollout_gpus is 0: no GPU is set apart for rollouts; set cluster.rollout_gpus to "
        "1 to 7 (e.g. 2 of 8), or rollout.max_staleness to 0")


@pytest.mark.parametrize("rollout_gpus", [8, 9])
def test_a_rollout_pool_of_every_gpu_leaves_none_for_the_learner_and_is_refused(rollout_gpus):
    refusal = asynchronous_layout_refusal(h100x8(2, rollout_gpus=rollout_gpus))
    assert refusal.config_field == "cluster.rollout_gpus"
    assert f"cluster.rollout_gpus is {rollout_gpus} of the run's 8 GPUs (cluster.num_gpus): no GPU is left for the " \
           "learner; set cluster.rollout_gpus to 1 to 7" in refusal.message


def test_a_rollout_pool_that_vllms_engines_do_not_tile_is_refused_with_the_sizes_that_do():
    config = RunConfig.from_preset("h100x8", {"rollout": {"max_staleness": 1, "vllm_tensor_parallel_size": 2},
                                              "cluster": {"rollout_gpus": 3}})
    assert asynchronous_layout_refusal(config) == (
        "rollout.vllm_tensor_parallel_size",
        "rollout.vllm_tensor_parallel_size is 2, which does not divide the rollout pool's 3 GPUs "
        "(cluster.rollout_gpus): each vLLM engine spans that many GPUs of the pool; set it to one of 1, 3, or "
        "cluster.rollout_gpus to a multiple of 2")


def test_vllms_engines_tile_the_rollout_pool_not_every_rank():
    # 3 does not divide 8 GPUs, but the engines span the pool of 3 alone.
    config = RunConfig.from_preset("h100x8", {"rollout": {"max_staleness": 1, "vllm_tensor_parallel_size": 3},
                                              "cluster": {"rollout_gpus": 3}, "optimizer": {"mini_batch_prompts": 32}})
    assert asynchronous_layout_problem(config) is None
    assert all(field != "rollout.vllm_tensor_parallel_size" for field, _ in rank_rule_problems(config, 8))


def test_the_recipes_mini_batch_trains_on_verls_six_learner_and_two_rollout_gpus():
    # 32 prompts × 8 samples = 256 sequences over 6 learner ranks: shares of 43 and 42, one process's update
    # all the same (tests/learning/test_uneven_rank_shares_train_as_one_process.py).
    six_and_two = h100x8(1, rollout_gpus=2)
    assert learner_gpus(six_and_two) == 6 and six_and_two.optimizer.mini_batch_prompts == 32
    assert rank_rule_problems(six_and_two, 8) == []
    assert rank_rule_problems(h100x8(1, rollout_gpus=4), 8) == []


def test_a_mini_batch_of_fewer_sequences_than_the_learner_pool_is_refused_counting_that_pool_alone():
    thin = RunConfig.from_preset("h100x8", {"rollout": {"max_staleness": 1, "samples_per_prompt": 1, "prompts_per_step": 8},
                                            "cluster": {"rollout_gpus": 2}, "optimizer": {"mini_batch_prompts": 4}})
    assert rank_rule_problems(thin, 8) == [("optimizer.mini_batch_prompts", (
        "optimizer.mini_batch_prompts (4) × rollout.samples_per_prompt (1) is 4 sequences per optimizer step, fewer "
        "than the learner pool's 6 ranks (cluster.num_gpus − cluster.rollout_gpus) that share each mini-batch's "
        "sequences: 2 of them would hold none in any mini-batch and only run zero-weighted placeholder passes; set "
        "optimizer.mini_batch_prompts to at least 6 (and rollout.prompts_per_step to a multiple of it), or "
        "rollout.samples_per_prompt to at least 2"))]
    # The same 4 sequences on 8 GPUs with a pool of 4: the learner pool's 4 ranks hold one each.
    assert rank_rule_problems(thin.model_copy(update={"cluster": thin.cluster.model_copy(
        update={"rollout_gpus": 4})}), 8) == []


def test_the_trainers_start_up_checks_refuse_the_layout_with_the_same_sentence():
    config = h100x8(1)
    with pytest.raises(ValueError) as refusal:
        check_world_fits_config(config, 8)
    assert str(refusal.value) == asynchronous_layout_problem(config)
    one_gpu = h100x8(1, num_gpus=1)
    with pytest.raises(ValueError) as refusal:
        check_launch_fits_config(one_gpu, None)
    assert str(refusal.value) == asynchronous_layout_problem(one_gpu)
    cpu = RunConfig.from_preset("cpu-demo", {"rollout": {"max_staleness": 4}})
    with pytest.raises(ValueError) as refusal:
        check_launch_fits_config(cpu, None)
    assert str(refusal.value) == asynchronous_layout_problem(cpu)


def test_the_platforms_launch_check_refuses_on_the_field_to_change_cpu_runs_included():
    assert memory_fit.check_fits_by_field(h100x8(0, rollout_gpus=2)) == {
        "cluster.rollout_gpus": [asynchronous_layout_problem(h100x8(0, rollout_gpus=2))]}
    cpu = RunConfig.from_preset("cpu-smoke", {"rollout": {"max_staleness": 3}})
    assert memory_fit.check_fits_by_field(cpu) == {"rollout.max_staleness": [asynchronous_layout_problem(cpu)]}
    assert memory_fit.check_fits(RunConfig.from_preset("cpu-smoke", {"rollout": {"max_staleness": 2}})) == []


def test_the_run_command_refuses_the_layout_with_exit_code_2_and_says_why_in_its_events(tmp_path, capsys):
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "a", "formal_statement": "theorem a : (1 : ℕ) = 1 := by"}) + "\n")
    code = trainer_main(["run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--output",
                         str(tmp_path / "out"), "--set", "rollout.max_staleness=3"])
    captured = capsys.readouterr()
    assert code == 2
    expected = asynchronous_layout_problem(RunConfig.from_preset("cpu-smoke", {"rollout": {"max_staleness": 3}}))
    assert expected in captured.err
    finished = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")][-1]
    assert finished["type"] == "run_finished" and finished["payload"]["status"] == "failed"
    assert expected in finished["payload"]["reason"]


def test_the_memory_plan_command_refuses_the_layout_with_exit_code_2():
    result = subprocess.run([sys.executable, "-m", "trainer", "memory-plan", "--preset", "h100x8", "--set",
                             "rollout.max_staleness=1", "--no-validate"],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 2
    assert f"memory-plan: {asynchronous_layout_problem(h100x8(1))}" in result.stderr


def test_the_learner_pool_takes_the_gpus_the_rollout_pool_leaves():
    # Where each pool's GPUs sit is the placement rule's (tests/placement/test_one_placement_rule_packs_…).
    assert learner_gpus(h100x8(1, rollout_gpus=2)) == 6
    assert learner_gpus(h100x8(0)) == 8


def test_a_well_laid_out_asynchronous_gpu_run_passes_the_launch_check_with_one_rank_per_learner_gpu():
    from trainer.ranks import RankPosition

    # 6 learner ranks: a mini-batch of 48 prompts is 8 per rank, and 288 prompts a step are 6 mini-batches.
    config = RunConfig.from_preset("h100x8", {"rollout": {"max_staleness": 1, "prompts_per_step": 288},
                                              "optimizer": {"mini_batch_prompts": 48}, "cluster": {"rollout_gpus": 2}})
    assert asynchronous_layout_problem(config) is None
    check_launch_fits_config(config, RankPosition(rank=0, world_size=6, local_rank=0))  # torchrun's learner ranks
    with pytest.raises(ValueError, match="one of 8 ranks .* leaves 6 learner GPU"):
        check_launch_fits_config(config, RankPosition(rank=0, world_size=8, local_rank=0))


def test_a_single_learner_gpu_beside_its_pool_runs_as_one_process():
    config = RunConfig.from_preset("h100x8", {"rollout": {"max_staleness": 1, "prompts_per_step": 256},
                                              "optimizer": {"mini_batch_prompts": 32},
                                              "cluster": {"num_gpus": 2, "rollout_gpus": 1}})
    check_launch_fits_config(config, None)
