"""The PostgreSQL and Redis the tests and `make run` start run the major versions production runs:
the images deploy/compose names, and the managed servers deploy/k8s asks for. Read from the running
servers, so neither side can move alone."""

import re
from pathlib import Path

import pytest
import redis
import yaml

from deploy.services import RedisService, ServiceError, free_port
from tests.deploy.test_images_and_versions_are_pinned import compose_images, kubernetes_images

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy"


def production_majors(repository: str) -> dict[str, int]:
    """Where production names ``repository`` (``postgres``, ``redis``) → the major version it names."""
    majors = {}
    for source, image in compose_images() + kubernetes_images():
        name, _, tag = image.split("@")[0].rpartition(":")
        if name.rsplit("/", 1)[-1] == repository:
            majors[f"{source} {image}"] = int(re.match(r"\d+", tag).group())
    # Kubernetes runs them as managed services; the manifest says which majors they must be.
    managed = re.search(r"PostgreSQL (\d+) and Redis (\d+)", (DEPLOY_DIR / "k8s" / "40-platform.yaml").read_text())
    majors[f"k8s:40-platform.yaml managed {repository}"] = int(managed.group(1 if repository == "postgres" else 2))
    return majors


@pytest.mark.django_db
def test_the_embedded_postgresql_is_the_major_production_runs():
    from django.db import connection

    connection.ensure_connection()
    running = connection.pg_version // 10000  # 180006 is 18.6
    named = production_majors("postgres")
    assert len(named) == 2  # compose's image and the managed server
    assert {where: major for where, major in named.items() if major != running} == {}, (
        f"the tests run PostgreSQL {running}; production must run the same major")


def test_the_embedded_redis_is_the_major_production_runs(settings):
    version = redis.Redis.from_url(settings.REDIS_URL).info("server")["redis_version"]
    running = int(version.split(".")[0])
    named = production_majors("redis")
    assert len(named) == 2
    assert {where: major for where, major in named.items() if major != running} == {}, (
        f"the tests run Redis {version}; production must run the same major")


def test_without_redis_server_installed_the_error_names_the_bootstrap_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    service = RedisService(name="redis-missing", port=free_port(), log_dir=tmp_path / "logs", data_dir=tmp_path / "redis")
    with pytest.raises(ServiceError, match=r"redis-server is not installed: run deploy/bootstrap.sh"):
        service.start()
    assert not service.is_running()


def test_compose_keeps_postgresql_data_where_its_volume_is_mounted():
    """The 18 image's default data folder lies outside the volume's old mount: a volume with 17's files
    would then look empty, and a new database would start beside them."""
    postgres = yaml.safe_load((DEPLOY_DIR / "compose" / "compose.yaml").read_text())["services"]["postgres"]
    assert "postgres-data:/var/lib/postgresql/data" in postgres["volumes"]
    assert postgres["environment"]["PGDATA"] == "/var/lib/postgresql/data"
