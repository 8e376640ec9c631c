"""deploy/k8s/examples/20-raycluster-2x4-gpus.yaml: the KubeRay manifests' multi-node example. It validates
against KubeRay's schema, it is 20-raycluster.yaml but for its worker group (so the two cannot drift apart), and
its group is the layout docs/operations/sizing.md sizes: an h100x8 run over two 4-GPU nodes, with NCCL on
InfiniBand between them."""

from __future__ import annotations

import yaml

from tests.deploy.test_manifests_validate_against_their_schemas import DEPLOY_DIR, raycluster_validator
from trainer.config import RunConfig
from trainer.node_layout import NodeLayout, placement_for

EXAMPLE = DEPLOY_DIR / "k8s" / "examples" / "20-raycluster-2x4-gpus.yaml"
BASE = DEPLOY_DIR / "k8s" / "20-raycluster.yaml"


def load(path):
    [document] = [document for document in yaml.safe_load_all(path.read_text()) if document]
    return document


def test_the_example_validates_against_the_kuberay_schema():
    raycluster_validator().validate(load(EXAMPLE))


def test_the_example_is_the_base_raycluster_but_for_its_worker_group():
    example, base = load(EXAMPLE), load(BASE)
    assert example["metadata"] == base["metadata"]
    assert {key: value for key, value in example["spec"].items() if key != "workerGroupSpecs"} == \
           {key: value for key, value in base["spec"].items() if key != "workerGroupSpecs"}
    head_env = {item["name"]: item for item in base["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]}
    [group] = example["spec"]["workerGroupSpecs"]
    worker_env = {item["name"]: item for item in group["template"]["spec"]["containers"][0]["env"]}
    # The worker has every setting the cluster's pods share, besides the head's job timeout.
    assert {name for name in head_env if name != "RAY_JOB_START_TIMEOUT_SECONDS"} <= set(worker_env)
    assert all(worker_env[name] == head_env[name] for name in head_env if name in worker_env)


def test_its_two_4_gpu_workers_hold_an_h100x8_run_with_nccl_on_infiniband_between_them():
    [group] = load(EXAMPLE)["spec"]["workerGroupSpecs"]
    [container] = group["template"]["spec"]["containers"]
    gpus = int(container["resources"]["limits"]["nvidia.com/gpu"])
    assert (group["maxReplicas"], gpus) == (2, 4)
    placement = placement_for(RunConfig.from_preset("h100x8"), NodeLayout(nodes=group["maxReplicas"], gpus_per_node=gpus))
    assert placement.learner_nodes == 2 and placement.engines_off_rank0_node == 4
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["NCCL_IB_DISABLE"] == "0" and env["NCCL_IB_HCA"]
    assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
    shm = next(volume for volume in group["template"]["spec"]["volumes"] if volume["name"] == "shm")
    object_store = int(group["rayStartParams"]["object-store-memory"])
    assert object_store < int(shm["emptyDir"]["sizeLimit"].removesuffix("Gi")) * 1024**3
