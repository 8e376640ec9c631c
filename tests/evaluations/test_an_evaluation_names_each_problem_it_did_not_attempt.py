"""An evaluation never drops a problem silently (issue 45: a cpu-smoke evaluation of 39 PutnamBench problems reported
38, and nothing said ``putnam_1962_a2``, the longest statement, had been left out). A problem whose prompt is over the
preset's budget is named with its reason in the evaluation's event, the trainer's log and the stored evaluation,
counted in ``problems_not_attempted``, and shown on the benchmark's page as "not attempted (why)", never as "–".

A real evaluation: ``python -m trainer evaluate`` with the cpu-smoke preset (its smoke model, the transformers engine)
against the stand-in Lean server (a stand-in, not Lean), publishing to the run's Redis stream as a dispatched run
does; the platform's own ingester stores what it published.
"""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from promptsets.benchmarks import mark_as_benchmark
from promptsets.models import PromptsetVersion
from promptsets.intake import FileCheck
from promptsets.versions import import_promptset
from runs.ingest import EventIngester
from runs.models import Evaluation, RunEvent
from trainer.config import RunConfig
from trainer.sft.smoke_model import SMOKE_PROBLEMS
from trainer.verification.standin_server import StandinServerThread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(1800)]

REPOSITORY = Path(__file__).resolve().parents[2]
LONG_KEY = "smoke_long_sum"
# 800 terms: thousands of characters, far over cpu-smoke's prompt budget (rollout.max_prompt_tokens 1,024).
LONG_STATEMENT = f"theorem {LONG_KEY} : (0 : ℕ)" + " + 1" * 800 + " = 800 := by"


def smoke_promptset_with_one_long_statement(owner) -> PromptsetVersion:
    rows = [{"statement_id": problem.problem_id, "formal_statement": problem.formal_statement,
             "natural_language": problem.informal_statement, "header": problem.header, "source": problem.source}
            for problem in SMOKE_PROBLEMS]
    rows.append({**rows[0], "statement_id": LONG_KEY, "formal_statement": LONG_STATEMENT,
                 "natural_language": "Add 800 ones."})
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    result = import_promptset(owner, "smoke and one long", FileCheck(io.BytesIO(lines), filename="long.jsonl"))
    return result.promptset.latest_version


def evaluate(run, version, tmp_path) -> None:
    from django.conf import settings

    promptset = tmp_path / "promptset.jsonl"
    promptset.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in version.trainer_rows()))
    with StandinServerThread() as server:
        finished = subprocess.run(
            [sys.executable, "-m", "trainer", "evaluate", "--preset", "cpu-smoke", "--promptset", str(promptset),
             "--output", str(tmp_path / "run"), "--lean-url", server.url, "--events", settings.REDIS_URL,
             "--run-id", str(run.pk), "--set", "schedule.eval_samples=1", "--set", "schedule.eval_error_correction=false"],
            cwd=REPOSITORY, capture_output=True, text=True, timeout=1500)  # start-up takes minutes on a loaded 2-core machine
    assert finished.returncode == 0, finished.stderr[-3000:]
    ingester = EventIngester()
    while ingester.poll_once():
        pass


@pytest.fixture
def run_streams_removed_afterwards():
    """Run ids restart with every test: the streams this one's trainer wrote are removed when it ends."""
    import redis
    from django.conf import settings

    yield
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter("trainer:run:*"):
        client.delete(key)


def test_a_problem_over_the_prompt_budget_is_named_counted_and_shown_as_not_attempted(
        alice, alices_client, run_streams_removed_afterwards, tmp_path):
    from runs.models import Run

    version = smoke_promptset_with_one_long_statement(alice)
    benchmark = mark_as_benchmark(version, alice)
    run = Run.objects.create(owner=alice, name="smoke eval", kind="eval", promptset_version=version, preset="cpu-smoke",
                             config=RunConfig.from_preset("cpu-smoke").to_json_dict(), state="starting")
    evaluate(run, version, tmp_path)

    evaluation = Evaluation.objects.get(run=run)
    assert evaluation.values["problems"] == len(SMOKE_PROBLEMS)
    assert evaluation.values["problems_not_attempted"] == 1
    (left_out,) = evaluation.not_attempted
    assert left_out["problem_id"] == LONG_KEY
    assert "over rollout.max_prompt_tokens (1,024)" in left_out["reason"]
    logged = [event.payload["message"] for event in RunEvent.objects.filter(run=run, type="log")]
    assert any(LONG_KEY in message and "not attempted" in message for message in logged), logged

    run_page = alices_client.get(f"/runs/{run.pk}/").content.decode()
    assert f"1 problem not attempted: {LONG_KEY} ({left_out['reason']})" in run_page

    page = alices_client.get(f"/benchmarks/{benchmark.pk}/")
    html = page.content.decode()
    cells = {problem.problem_key: cell for problem, cells in page.context["matrix"] for cell in cells}
    assert cells[LONG_KEY][2] == left_out["reason"]
    assert f"not attempted ({left_out['reason']})" in html
    assert f"1 of {len(SMOKE_PROBLEMS) + 1} problems not attempted: {LONG_KEY}" in html
