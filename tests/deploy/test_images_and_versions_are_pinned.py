"""Every image and version a deployment pulls is pinned: a tag or digest, never `latest`."""

import re
from pathlib import Path

import pytest
import yaml

REPO_DIR = Path(__file__).resolve().parents[2]
DEPLOY_DIR = REPO_DIR / "deploy"
DOCKERFILES = sorted((DEPLOY_DIR / "docker").glob("*.Dockerfile"))
IMAGE_REFERENCE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9._/:-]*?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")


def compose_images():
    compose = yaml.safe_load((DEPLOY_DIR / "compose" / "compose.yaml").read_text())
    return [(f"compose:{name}", service["image"]) for name, service in compose["services"].items()]


def _images_in(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "image" and isinstance(value, str):
                yield value
            else:
                yield from _images_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from _images_in(item)


def kubernetes_images():
    return [(f"k8s:{path.name}", image) for path in sorted((DEPLOY_DIR / "k8s").glob("*.yaml"))
            for document in yaml.safe_load_all(path.read_text()) for image in _images_in(document)]


def dockerfile_images():
    return [(f"docker:{path.name}", line.split()[1]) for path in DOCKERFILES
            for line in path.read_text().splitlines() if line.startswith("FROM ")]


def unpinned_reason(image):
    match = IMAGE_REFERENCE.match(image)
    if "$" in image:
        return "its tag comes from a variable, so the file alone does not say what runs"
    if not match:
        return "it is not an image reference"
    if not match["tag"] and not match["digest"]:
        return "it has neither a tag nor a digest, so it means latest"
    if match["tag"] == "latest" or (match["tag"] and not re.search(r"\d", match["tag"])):
        return f"its tag {match['tag']!r} names no version"
    return None


ALL_IMAGES = compose_images() + kubernetes_images() + dockerfile_images()


def test_every_kind_of_manifest_names_images():
    sources = {source.split(":")[0] for source, _ in ALL_IMAGES}
    assert sources == {"compose", "k8s", "docker"}
    assert len(ALL_IMAGES) >= 15


@pytest.mark.parametrize("source, image", ALL_IMAGES, ids=[f"{s}={i}" for s, i in ALL_IMAGES])
def test_each_image_is_pinned_to_a_version(source, image):
    assert unpinned_reason(image) is None, f"{source}: {image!r} is not pinned: {unpinned_reason(image)}"


def test_the_pin_check_refuses_latest_a_bare_name_and_a_variable_tag():
    assert unpinned_reason("redis:latest")
    assert unpinned_reason("redis")
    assert unpinned_reason("redis:stable")
    assert unpinned_reason("lean-rl:${TAG}")
    assert unpinned_reason("redis:7.4.5-bookworm") is None
    assert unpinned_reason("redis@sha256:" + "0" * 64) is None


def test_nothing_in_deploy_reaches_for_a_latest_tag():
    offenders = [str(path.relative_to(REPO_DIR)) for path in DEPLOY_DIR.rglob("*")
                 if path.is_file() and path.suffix in {".yaml", ".yml", ".md", ".conf", ".example", ""}
                 and re.search(r":latest\b", path.read_text(errors="replace"))]
    offenders += [str(path.relative_to(REPO_DIR)) for path in DOCKERFILES if ":latest" in path.read_text()]
    assert offenders == []


def test_the_lean_server_is_the_lean_v4_15_0_build_the_kimina_models_were_trained_against():
    lean_images = {image for _, image in ALL_IMAGES if "kimina-lean-server" in image}
    assert lean_images == {"projectnumina/kimina-lean-server:2.0.0"}


def test_ray_is_the_same_version_in_requirements_the_images_and_the_raycluster():
    [ray_pin] = re.findall(r"^ray\[default\]==([\d.]+)", (REPO_DIR / "requirements.txt").read_text(), re.M)
    raycluster = next(document for document in yaml.safe_load_all((DEPLOY_DIR / "k8s" / "20-raycluster.yaml").read_text()))
    assert raycluster["spec"]["rayVersion"] == ray_pin
    assert f"FROM rayproject/ray:{ray_pin}-" in (DEPLOY_DIR / "docker" / "ray-gpu.Dockerfile").read_text()


def test_the_dockerfiles_install_torch_at_a_pinned_version():
    for path in DOCKERFILES:
        for install in re.findall(r"pip install[^\n]*(?:\\\n[^\n]*)*", path.read_text()):
            for package in re.findall(r"\b(torch|vllm)\b(?!==)(?![-\w/])", install):
                pytest.fail(f"{path.name} installs {package} without ==version: {install!r}")
