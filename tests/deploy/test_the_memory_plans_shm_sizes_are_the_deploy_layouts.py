"""The /dev/shm and Ray object-store sizes the memory plan checks the weight pushes against
(trainer/memory/memory_plan.py ``DEPLOY_SHM_LAYOUTS``) are those the deploy layouts set: a layout changed without the plan
would be planned against sizes it no longer has."""

from __future__ import annotations

import re

import yaml

from tests.deploy.conftest import DEPLOY_DIR
from trainer.memory.memory_plan import DEPLOY_SHM_LAYOUTS, GIB

LAYOUTS = {layout.name: layout for layout in DEPLOY_SHM_LAYOUTS}
# Docker reads shm_size's units as binary (go-units RAMInBytes: 1gb = 1024³ bytes), as Kubernetes reads Gi.
UNITS = {"gb": GIB, "Gi": GIB}


def size_in_bytes(text: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([A-Za-z]*)", text).groups()
    return int(number) * UNITS.get(unit, 1)


def compose_default(value: str) -> str:
    """``${NAME:-default}``'s default."""
    return re.search(r"\$\{\w+:-([^}]+)\}", value).group(1)


def test_the_compose_layouts_shm_and_object_store_are_the_plans():
    ray_head = yaml.safe_load((DEPLOY_DIR / "compose" / "compose.yaml").read_text())["services"]["ray-head"]
    [object_store] = [part for part in ray_head["command"] if part.startswith("--object-store-memory=")]
    assert size_in_bytes(compose_default(ray_head["shm_size"])) == LAYOUTS["compose"].shm_bytes
    assert size_in_bytes(compose_default(object_store)) == LAYOUTS["compose"].object_store_bytes


def test_the_kuberay_gpu_workers_shm_and_object_store_are_the_plans():
    cluster = yaml.safe_load((DEPLOY_DIR / "k8s" / "20-raycluster.yaml").read_text())
    [workers] = cluster["spec"]["workerGroupSpecs"]
    [shm] = [volume for volume in workers["template"]["spec"]["volumes"] if volume["name"] == "shm"]
    assert size_in_bytes(shm["emptyDir"]["sizeLimit"]) == LAYOUTS["KubeRay"].shm_bytes
    assert size_in_bytes(workers["rayStartParams"]["object-store-memory"]) == LAYOUTS["KubeRay"].object_store_bytes
