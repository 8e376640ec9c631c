"""``python -m trainer step-time`` and ``memory-plan`` take a node layout (``--nodes --gpus-per-node
--network-gbps``) and predict what crosses the network: the weight push and its share of the predicted step,
labelled as predictions at an assumed bandwidth; without the options their reports are as before."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from deploy.services import REPO_DIR
from trainer.__main__ import main as trainer_main
from trainer.command_line import EXIT_BAD_ARGUMENTS
from trainer.config import RunConfig
from trainer.memory import memory_plan
from trainer.node_layout import FSDP_COLLECTIVES, WEIGHT_PUSH, NodeLayout
from trainer.step_time.inputs import QWEN3_1_7B_PARAMETERS


def step_time(capsys, *argv: str) -> dict:
    code = trainer_main(["step-time", "--preset", "h100x8", "--eta", "0", "--steps", "4", "--json", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def push(report: dict) -> dict:
    return next(item for item in report["cross_node"]["crossings"] if item["name"] == WEIGHT_PUSH)


def test_h100x8_on_two_4_gpu_nodes_predicts_the_push_and_its_share_of_the_step(capsys):
    report = step_time(capsys, "--nodes", "2", "--gpus-per-node", "4")
    assert report["cross_node"]["layout"] == {"nodes": 2, "gpus_per_node": 4, "network_gbps": 400.0,
                                              "source": report["cross_node"]["layout"]["source"]}
    assert report["cross_node"]["layout"]["source"].startswith("assumed: 400 Gb/s per node")
    assert "prediction" in report["cross_node"]["what"]
    assert push(report)["bytes_per_step"] == round(QWEN3_1_7B_PARAMETERS * 2)
    [row] = report["predictions"]
    assert row["cross_node"]["weight_push_s"] == pytest.approx(push(report)["seconds_per_step"], abs=1e-4)
    assert row["cross_node"]["weight_push_share"] == pytest.approx(
        push(report)["seconds_per_step"] / row["step_time_s"], rel=1e-3)
    assert "--nodes 2 --gpus-per-node 4 --network-gbps 400" in report["rerun"]


def test_twice_the_bandwidth_halves_the_predicted_push(capsys):
    at_400 = push(step_time(capsys, "--nodes", "2", "--gpus-per-node", "4"))
    at_800 = push(step_time(capsys, "--nodes", "2", "--gpus-per-node", "4", "--network-gbps", "800"))
    assert at_800["bytes_per_step"] == at_400["bytes_per_step"]
    assert at_800["seconds_per_step"] == pytest.approx(at_400["seconds_per_step"] / 2, rel=1e-3)


def test_on_one_node_nothing_crosses_and_the_step_is_the_layouts_without_a_network(capsys):
    plain = step_time(capsys)
    one_node = step_time(capsys, "--nodes", "1", "--gpus-per-node", "8")
    two_nodes = step_time(capsys, "--nodes", "2", "--gpus-per-node", "4", "--network-gbps", "100")
    assert plain["cross_node"] is None
    assert one_node["cross_node"]["total_bytes_per_step"] == 0
    assert one_node["predictions"][0]["step_time_s"] == plain["predictions"][0]["step_time_s"]
    # Ranks across nodes wait on the network: the prediction grows by what it adds.
    assert two_nodes["predictions"][0]["step_time_s"] > plain["predictions"][0]["step_time_s"]


def test_a_layout_that_cannot_hold_the_run_is_refused_with_the_fix(capsys):
    code = trainer_main(["step-time", "--preset", "h100x8", "--nodes", "2", "--gpus-per-node", "2"])
    assert code == EXIT_BAD_ARGUMENTS
    assert "cannot hold the run's 8 (cluster.num_gpus); give more --nodes or --gpus-per-node" in capsys.readouterr().err
    refused = subprocess.run([sys.executable, "-m", "trainer", "memory-plan", "--preset", "h100x8", "--nodes", "3",
                              "--gpus-per-node", "2"], capture_output=True, text=True, cwd=REPO_DIR, timeout=300)
    assert refused.returncode == 2 and "cannot hold the run's 8" in refused.stderr


def test_the_memory_plan_counts_the_push_from_the_models_architecture():
    config = RunConfig.from_preset("h100x8")
    traffic = memory_plan.plan_cross_node(config, NodeLayout(nodes=2, gpus_per_node=4))
    # Qwen3-1.7B's config.json: the embedding 151,936 × 2,048 (tied: counted once), and 28 layers of attention
    # (q and o 2,048², k and v 2,048 × 1,024, q and k norms 128 each), MLP (3 × 2,048 × 6,144) and two norms
    # of 2,048; the final norm 2,048.
    layer = 2 * 2048 * 2048 + 2 * 2048 * 1024 + 2 * 128 + 3 * 2048 * 6144 + 2 * 2048
    parameters = 151936 * 2048 + 28 * layer + 2048
    assert parameters == 1_720_574_976
    assert traffic.crossing(WEIGHT_PUSH).bytes_per_step == parameters * 2  # bfloat16
    assert traffic.crossing(FSDP_COLLECTIVES).bytes_per_step > 0
    split = memory_plan.plan_cross_node(
        RunConfig.from_preset("h100x8", {"cluster": {"num_gpus": 16, "rollout_gpus": 8},
                                         "rollout": {"max_staleness": 1}}), NodeLayout(nodes=2, gpus_per_node=8))
    assert split.crossing(FSDP_COLLECTIVES).bytes_per_step == 0
    assert split.crossing(WEIGHT_PUSH).bytes_per_step == parameters * 2
