"""Every API input names what it takes: an unknown field is a 422 naming it, never silently ignored.

POST /api/runs/ is the launch contract's (issue 13) and is checked there.
"""

import importlib
import io
import json

import pytest
from ninja import Schema

from config.api_schemas import StrictSchema

pytestmark = pytest.mark.django_db
API_MODULES = ("promptsets.api", "proofs.api", "runs.api")
OWNED_ELSEWHERE = {"runs.api.LaunchIn"}


def test_every_input_schema_of_the_api_forbids_unknown_fields():
    lax = []
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if (isinstance(value, type) and issubclass(value, Schema) and name.endswith("In")
                    and f"{module_name}.{name}" not in OWNED_ELSEWHERE and not issubclass(value, StrictSchema)):
                lax.append(f"{module_name}.{name}")
    assert lax == [], f"input schemas that ignore unknown fields: {lax}; derive them from StrictSchema"


def test_an_upload_with_an_unknown_field_is_refused_and_stores_nothing(client, alice):
    from promptsets.models import Promptset

    client.force_login(alice)
    row = json.dumps({"formal_statement": "theorem t : (1 : ℕ) = 1 := by"}).encode() + b"\n"
    response = client.post("/api/promptsets/", {"name": "x", "skip_invalid_row": "true", "file": io.BytesIO(row)})
    assert response.status_code == 422
    assert "'skip_invalid_row'" in response.json()["detail"] and "skip_invalid_rows" in response.json()["detail"]
    assert not Promptset.objects.exists()


def test_rollout_filters_with_an_unknown_field_are_refused(client, alice, make_run):
    client.force_login(alice)
    run = make_run()
    response = client.get(f"/api/proofs/runs/{run.pk}/rollouts?stepp=3")
    assert response.status_code == 422 and "'stepp'" in response.json()["detail"]
    assert client.get(f"/api/proofs/runs/{run.pk}/rollouts?step=3").status_code == 200


def test_a_curation_rule_with_an_unknown_field_is_refused(client, alice, promptset_version):
    client.force_login(alice)
    response = client.post(f"/api/promptsets/{promptset_version.promptset_id}/versions/1/curate",
                           {"kind": "split", "eval_fraction": 0.5, "eval_fractoin": 0.2}, content_type="application/json")
    assert response.status_code == 422 and "eval_fractoin" in response.json()["detail"]
