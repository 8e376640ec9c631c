"""A promptset version downloads as JSON Lines or Parquet, one row per problem with its weight, and the
file uploads again as the same problems; only people who may see the promptset can download it."""

import io
import json

import pyarrow.parquet as pq
import pytest

from promptsets.intake import FileCheck
from promptsets.versions import import_promptset

pytestmark = pytest.mark.django_db


def rows_of(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_jsonl_export_holds_every_problem_in_order_with_its_weight(client, alice, promptset_version):
    entry = promptset_version.entries.order_by("position")[1]
    entry.copies = 3
    entry.save()
    client.force_login(alice)
    url = f"/promptsets/{promptset_version.promptset_id}/versions/1/export.jsonl"
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="arith-v1.jsonl"'
    rows = [json.loads(line) for line in rows_of(response).decode().splitlines()]
    assert [row["problem_id"] for row in rows] == ["add_small", "mul_small", "lt_small"]
    assert [row["copies"] for row in rows] == [1, 3, 1]
    assert rows[0]["header"] == "import Mathlib" and rows[0]["formal_statement"].endswith(":= by")


def test_parquet_export_uploads_again_as_the_same_problems(client, alice, promptset_version):
    client.force_login(alice)
    response = client.get(f"/api/promptsets/{promptset_version.promptset_id}/versions/1/export.parquet")
    assert response.status_code == 200
    data = rows_of(response)
    table = pq.read_table(io.BytesIO(data))
    assert table.column_names == ["problem_id", "name", "formal_statement", "informal_statement", "header", "source",
                                  "win_rate", "copies", "prior_attempts", "prior_solves", "prior_signal_less_streak"]
    again = import_promptset(alice, "arith again", FileCheck(io.BytesIO(data), filename="arith-v1.parquet"))
    original = {(p.problem_key, p.formal_statement) for p in promptset_version.problems.all()}
    assert {(p.problem_key, p.formal_statement) for p in again.version.problems.all()} == original


def test_an_unknown_format_is_a_404_that_names_the_formats(client, alice, promptset_version):
    client.force_login(alice)
    response = client.get(f"/api/promptsets/{promptset_version.promptset_id}/versions/1/export.xlsx")
    assert response.status_code == 404 and "jsonl, parquet" in response.json()["detail"]


def test_a_stranger_cannot_download_a_private_promptset(client, charlie, promptset_version):
    client.force_login(charlie)
    assert client.get(f"/promptsets/{promptset_version.promptset_id}/versions/1/export.jsonl").status_code == 404
    assert client.get(f"/api/promptsets/{promptset_version.promptset_id}/versions/1/export.jsonl").status_code == 404
