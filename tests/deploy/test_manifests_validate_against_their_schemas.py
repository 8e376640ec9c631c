"""Every deployment manifest validates offline against its specification's schema."""

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from importlib_resources import files
from referencing import Registry, Resource

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE_FILES = sorted((DEPLOY_DIR / "compose").glob("compose*.yaml"))
KUBERNETES_FILES = sorted((DEPLOY_DIR / "k8s").glob("*.yaml"))
COMPOSE_SCHEMA = DEPLOY_DIR / "compose" / "compose-spec.schema.json"
RAYCLUSTER_SCHEMA = DEPLOY_DIR / "k8s" / "schemas" / "raycluster-ray.io-v1.schema.json"
KUBERNETES_VERSION = "1.33.0"  # the oldest version docs/operations/index.md supports


def kubernetes_documents():
    return [(path.name, document) for path in KUBERNETES_FILES
            for document in yaml.safe_load_all(path.read_text()) if document]


def raycluster_validator():
    definitions_dir = files("kubernetes_validate") / "kubernetes-json-schema" / f"v{KUBERNETES_VERSION}-local-strict"
    definitions = Resource.from_contents(json.loads((definitions_dir / "_definitions.json").read_text()))
    schema = json.loads(RAYCLUSTER_SCHEMA.read_text())
    registry = Registry().with_resource("/api/_definitions.json", definitions)
    return jsonschema.Draft202012Validator(schema, registry=registry)


def test_the_manifests_exist():
    assert [path.name for path in COMPOSE_FILES] == ["compose.yaml"]
    assert {"20-raycluster.yaml", "30-lean-server.yaml", "40-platform.yaml"} <= {p.name for p in KUBERNETES_FILES}


def test_the_compose_file_validates_against_the_compose_specification_offline():
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(COMPOSE_SCHEMA),
         *map(str, COMPOSE_FILES)], capture_output=True, text=True, timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_compose_check_would_catch_a_misspelt_key(tmp_path):
    broken = tmp_path / "compose.yaml"
    broken.write_text((DEPLOY_DIR / "compose" / "compose.yaml").read_text().replace("healthcheck:", "healtcheck:", 1))
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(COMPOSE_SCHEMA), str(broken)],
        capture_output=True, text=True, timeout=120,
    )
    assert checked.returncode == 1 and "healtcheck" in checked.stdout


@pytest.mark.parametrize("name, document", [
    pytest.param(name, document, id=f"{name}:{document['kind']}/{document['metadata']['name']}")
    for name, document in kubernetes_documents() if document["kind"] != "RayCluster"
])
def test_each_kubernetes_manifest_validates_against_the_kubernetes_schema(name, document):
    kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_raycluster_validates_against_the_kuberay_schema_with_kubernetes_pod_templates():
    [raycluster] = [document for _, document in kubernetes_documents() if document["kind"] == "RayCluster"]
    raycluster_validator().validate(raycluster)


def test_the_raycluster_check_would_catch_a_bad_pod_template_and_a_misspelt_field():
    [raycluster] = [document for _, document in kubernetes_documents() if document["kind"] == "RayCluster"]
    validator = raycluster_validator()
    misspelt = json.loads(json.dumps(raycluster))
    misspelt["spec"]["workerGroupSpecs"][0]["maxReplica"] = 4
    assert any("maxReplica" in error.message for error in validator.iter_errors(misspelt))
    bad_template = json.loads(json.dumps(raycluster))
    bad_template["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    assert list(validator.iter_errors(bad_template))
