"""miniF2F test and valid ship with the platform as public, read-only benchmark promptsets, and
``GET /api/benchmarks/`` lists them with the figures their papers published, labelled as quoted
(PutnamBench and ProofNet: test_putnambench_and_proofnet_ship_with_their_licences_and_published_conditions.py)."""

import json

import pytest
from django.core.management import call_command

from promptsets import benchmarks
from promptsets.models import Benchmark, Promptset
from tests.conftest import make_demo_promptset_version

pytestmark = pytest.mark.django_db


@pytest.fixture
def shipped():
    call_command("create_benchmarks")


def test_the_shipped_data_are_committed_in_the_repository_not_read_from_shared_data():
    for shipped in benchmarks.SHIPPED_BENCHMARKS:
        if not shipped.key.startswith("minif2f"):
            continue
        path = benchmarks.DATA_FOLDER / shipped.filename
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert len(rows) == 244
    assert "Apache-2.0" in (benchmarks.DATA_FOLDER / "README.md").read_text()
    assert "MIT" in (benchmarks.DATA_FOLDER / "README.md").read_text()


def test_the_api_lists_minif2f_test_with_244_problems_and_the_kimina_distill_reference(client, alice, shipped):
    client.force_login(alice)
    listed = {row["name"]: row for row in client.get("/api/benchmarks/").json()}
    assert listed["miniF2F-test"]["problems"] == 244
    assert listed["miniF2F-valid"]["problems"] == 244
    assert listed["miniF2F-test"]["is_shipped"]
    kimina = [row for row in listed["miniF2F-test"]["references"]
              if row["model"] == "Kimina-Prover-Distill-1.7B" and not row["with_error_correction"]]
    not_stated = "not stated by the source"
    assert kimina == [{
        "model": "Kimina-Prover-Distill-1.7B", "metric": "miniF2F-test pass@32", "k": 32, "pass_at_k": 0.7295,
        "with_error_correction": False, "source": "https://huggingface.co/blog/AI-MO/kimina-prover-rl",
        "problems_solved": None, "benchmark_version": not_stated, "lean_version": not_stated,
        "mathlib_version": not_stated, "rounds": not_stated, "max_tokens": not_stated, "verifier": not_stated,
        "label": "published, not measured here",
    }]
    assert listed["miniF2F-valid"]["references"] == []


def test_the_shipped_problems_are_the_statements_of_the_files_in_their_order(shipped):
    test_version = Benchmark.objects.get(reference_key=benchmarks.MINIF2F_TEST).version
    keys = [entry.problem.problem_key for entry in test_version.entries.select_related("problem")]
    assert keys[0] == "mathd_algebra_478" and len(set(keys)) == 244
    assert all(entry.problem.header.startswith("import Mathlib") for entry in test_version.entries.select_related("problem"))


def test_creating_them_twice_creates_nothing_new(shipped):
    again = benchmarks.create_shipped_benchmarks()
    shipped_count = len(benchmarks.SHIPPED_BENCHMARKS)
    assert [is_created for _, is_created in again] == [False] * shipped_count
    assert Benchmark.objects.count() == shipped_count and Promptset.objects.count() == shipped_count


def test_nobody_may_curate_a_shipped_benchmark_and_nobody_signs_in_as_its_owner(alice, shipped):
    promptset = Benchmark.objects.get(reference_key=benchmarks.MINIF2F_TEST).version.promptset
    assert promptset.is_public and promptset.is_visible_to(alice)
    assert not promptset.is_editable_by(alice)
    owner = promptset.owner
    assert not owner.is_active and not owner.has_usable_password()


def test_a_person_marks_a_version_of_their_own_as_a_benchmark_and_only_they_see_it(client, alice, bob):
    version = make_demo_promptset_version(alice)
    client.force_login(bob)
    refused = client.post("/api/benchmarks/", {"promptset_version_id": version.pk}, content_type="application/json")
    assert refused.status_code == 404  # bob cannot even see alice's private promptset
    client.force_login(alice)
    response = client.post("/api/benchmarks/", {"promptset_version_id": version.pk, "name": "my arithmetic"},
                           content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["name"] == "my arithmetic" and response.json()["references"] == []
    assert [row["name"] for row in client.get("/api/benchmarks/").json()] == ["my arithmetic"]
    client.force_login(bob)
    assert client.get("/api/benchmarks/").json() == []


def test_a_stranger_who_is_not_signed_in_sees_nothing(client, shipped):
    assert client.get("/api/benchmarks/").status_code == 401
