"""Before a launch, the summary warns about a promptset the chosen preset cannot serve (issue 45), in words a
researcher can act on: the cpu-smoke model knows answers only to the smoke promptset's problems, and a prompt over
the preset's budget is left out by the run (trainer/recipe/prompt_budget.py), so each is named before launching.
The launch page draws the warnings from ``GET /api/runs/launch-summary`` (tests/browser holds the drawing)."""

import io
import json

import pytest

from promptsets.intake import FileCheck
from promptsets.versions import create_smoke_promptset, import_promptset

pytestmark = pytest.mark.django_db

LONG_KEY = "long_sum"
LONG_STATEMENT = f"theorem {LONG_KEY} : (0 : ℕ)" + " + 1" * 800 + " = 800 := by"


def warnings(client, version, **fields) -> list[str]:
    response = client.get("/api/runs/launch-summary", {"promptset_version_id": version.pk, **fields})
    assert response.status_code == 200, response.content
    return response.json()["warnings"]


def promptset_with_a_long_statement(owner):
    rows = [{"statement_id": "small_sum", "formal_statement": "theorem small_sum : (1 : ℕ) + 1 = 2 := by"},
            {"statement_id": LONG_KEY, "formal_statement": LONG_STATEMENT}]
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    return import_promptset(owner, "one long", FileCheck(io.BytesIO(lines), filename="long.jsonl")).promptset.latest_version


def test_cpu_smoke_on_another_promptset_is_warned_naming_the_problems_it_cannot_answer(alices_client,
                                                                                     promptset_version):
    said = " ".join(warnings(alices_client, promptset_version, preset="cpu-smoke"))
    keys = list(promptset_version.entries.values_list("problem__problem_key", flat=True))
    assert "knows answers only to the smoke promptset's problems (smoke_nat_add" in said
    assert f"{len(keys)} of this promptset's {len(keys)} problems are not among them" in said
    assert all(key in said for key in keys)
    assert "Choose the smoke promptset, or the cpu-demo preset for this one." in said


def test_cpu_smoke_on_its_own_promptset_and_cpu_demo_on_any_are_not_warned(alices_client, alice, promptset_version):
    smoke, _ = create_smoke_promptset(alice)
    assert warnings(alices_client, smoke.latest_version, preset="cpu-smoke") == []
    assert warnings(alices_client, promptset_version, preset="cpu-demo") == []


def test_a_statement_over_the_presets_prompt_budget_is_named_before_the_launch(alices_client, alice):
    version = promptset_with_a_long_statement(alice)
    (said,) = warnings(alices_client, version, preset="cpu-demo")
    assert said.startswith("1 of this promptset's 2 problems have a prompt over the cpu-demo preset's budget of "
                           "1,024 tokens (rollout.max_prompt_tokens), so the run will not attempt them")
    assert f"names each on its page: {LONG_KEY}; for example {LONG_KEY}: its prompt is " in said
    assert "small_sum" not in said


def test_a_promptset_one_may_not_see_is_refused_whether_or_not_it_exists(client, charlie, promptset_version):
    client.force_login(charlie)
    hidden = client.get("/api/runs/launch-summary", {"promptset_version_id": promptset_version.pk})
    missing = client.get("/api/runs/launch-summary", {"promptset_version_id": promptset_version.pk + 1000})
    assert hidden.status_code == missing.status_code == 422
    for response in (hidden, missing):
        (message,) = response.json()["field_errors"]["promptset_version_id"]
        assert message.startswith("no promptset version with id ") and message.endswith(" that you may see")
