"""``eval_every`` means one thing everywhere (issue 45): the form's help, the launch summary's note, the launching
guide and the configuration reference said "0: only at the end" beside "0 disables evaluation", and runs with 0 did
not evaluate. It is the schema's description (trainer/config.py), which the others read: 0 is no evaluation."""

from pathlib import Path

import pytest
from django.urls import reverse

from trainer.config import ScheduleConfig

pytestmark = pytest.mark.django_db

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "launching.md"


def meaning() -> str:
    return ScheduleConfig.model_fields["eval_every"].description


def test_the_schema_says_zero_is_no_evaluation_at_all():
    assert "0: no evaluation at all, not even at the end" in meaning()


def test_the_form_and_the_summary_say_what_the_schema_says(alices_client):
    page = alices_client.get(reverse("runs:new"))
    assert page.context["form"].fields["eval_every"].help_text == meaning()
    summary = alices_client.get("/api/runs/launch-summary", {"preset": "cpu-demo"}).json()["summary"]
    (evaluate_every,) = [row for row in summary if row["path"] == "schedule.eval_every"]
    assert evaluate_every["note"] == meaning()
    assert "only at the end" not in page.content.decode().split('name="eval_every"', 1)[1].split("</div>", 1)[0]


def test_the_launching_guide_does_not_say_zero_evaluates_at_the_end():
    (row,) = [line for line in GUIDE.read_text().splitlines() if line.startswith("| `eval_every` |")]
    assert "only at the end" not in row and "0: no evaluation at all" in row
