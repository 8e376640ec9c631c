"""The network policy admits to the Ray head only pods labelled for it: every platform pod that calls
Ray (the web's launch checks, the worker's dispatch, the sweeper) must carry that label, or it fails
in production only."""

from pathlib import Path

import yaml

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
CALLS_RAY = {"web", "worker", "sweeper"}


def documents():
    for path in sorted(K8S.glob("*.yaml")):
        yield from (doc for doc in yaml.safe_load_all(path.read_text()) if doc)


def admitted_labels():
    (policy,) = [d for d in documents() if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "ray-head-ingress"]
    return [rule["podSelector"]["matchLabels"] for rule in policy["spec"]["ingress"][0]["from"]
            if "matchLabels" in rule.get("podSelector", {})]


def test_every_platform_pod_that_calls_ray_carries_a_label_the_ray_policy_admits():
    deployments = {d["metadata"]["name"]: d for d in documents() if d["kind"] == "Deployment"}
    assert CALLS_RAY <= set(deployments), f"expected deployments {CALLS_RAY}, found {sorted(deployments)}"
    for name in CALLS_RAY:
        labels = deployments[name]["spec"]["template"]["metadata"]["labels"]
        assert any(all(labels.get(k) == v for k, v in selector.items()) for selector in admitted_labels()), (
            f"the {name} pods ({labels}) cannot reach the Ray head under the network policy")


def test_the_sweeper_runs_in_production_as_in_the_one_command_stack():
    deployments = {d["metadata"]["name"]: d for d in documents() if d["kind"] == "Deployment"}
    assert deployments["sweeper"]["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "sweep_runs"
    compose = yaml.safe_load((K8S.parent / "compose" / "compose.yaml").read_text())
    assert compose["services"]["sweeper"]["command"][-1] == "sweep_runs"
