"""Every mistake on the trainer's command line is one line naming the option and the fix, with an
exit code of its own (trainer/command_line.py), never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.services import free_port
from trainer.command_line import (
    EXIT_BAD_ARGUMENTS,
    EXIT_MALFORMED_INPUT,
    EXIT_MISSING_FILE,
    EXIT_NOTHING_DECIDED,
    EXIT_UNREACHABLE,
)

REPO = Path(__file__).resolve().parents[2]
STATEMENT = "theorem add : (2 : ℕ) + 3 = 5 := by"


def trainer(*argv: str, stdin: str = "", cwd: Path = REPO) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "trainer", *argv], input=stdin, capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


def assert_one_line(stderr: str, *fragments: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("trainer ")]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def problems(tmp_path) -> Path:
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps({"problem_id": "add", "formal_statement": STATEMENT}) + "\n")
    return path


def test_score_with_an_unknown_preset_lists_the_presets():
    code, _, err = trainer("score", "--preset", "h200x1", stdin="")
    assert code == EXIT_BAD_ARGUMENTS
    assert_one_line(err, "--preset h200x1", "cpu-demo", "h100x8")


def test_score_with_a_missing_problems_or_input_file_names_the_option(tmp_path):
    code, _, err = trainer("score", "--problems", str(tmp_path / "nope.jsonl"), stdin="")
    assert code == EXIT_MISSING_FILE
    assert_one_line(err, "--problems", "nope.jsonl", "no such file")
    code, _, err = trainer("score", "--input", str(tmp_path / "answers.jsonl"))
    assert code == EXIT_MISSING_FILE
    assert_one_line(err, "--input", "answers.jsonl", "no such file")


def test_score_with_a_malformed_line_names_the_line(problems):
    code, _, err = trainer("score", "--problems", str(problems), stdin='{"problem_id": "add", "response": "x"}\n{oops\n')
    assert code == EXIT_MALFORMED_INPUT
    assert_one_line(err, "line 2", "not JSON")


def test_score_fails_when_every_answer_was_censored(problems):
    unreachable = f"http://127.0.0.1:{free_port()}"
    answer = json.dumps({"problem_id": "add", "response": "<think>x</think>\n```lean4\n" + STATEMENT + "\n  norm_num\n```"})
    code, out, err = trainer("score", "--preset", "cpu-demo", "--problems", str(problems), "--url", unreachable,
                             "--timeout-s", "2",
                             stdin=answer + "\n")
    assert code == EXIT_NOTHING_DECIDED
    assert json.loads(out.splitlines()[0])["is_censored"] is True  # the output itself is unchanged
    assert_one_line(err, "no answer was decided", "censored", unreachable)


def test_run_with_an_unreachable_redis_says_so_at_once_and_fails_after_the_outage_limit(problems, tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"
    code, _, err = trainer("run", "--preset", "cpu-smoke", "--promptset", str(problems), "--output", str(tmp_path / "o"),
                           "--events", url, "--set", "events.max_outage_s=2", "--lean-url", "http://127.0.0.1:9")
    assert code == EXIT_UNREACHABLE
    assert "Traceback" not in err
    assert err.splitlines()[0].startswith(f"trainer: --events {url}: Redis does not answer")
    assert_one_line(err, "trainer run: the run failed:", "Redis")


def test_run_with_a_missing_promptset_names_the_option(tmp_path):
    code, out, err = trainer("run", "--preset", "cpu-smoke", "--promptset", str(tmp_path / "gone.jsonl"),
                             "--output", str(tmp_path / "o"))
    assert code == EXIT_MISSING_FILE
    assert_one_line(err, "--promptset", "gone.jsonl", "no such file")
    assert json.loads(out.splitlines()[-1])["payload"]["status"] == "failed"  # the platform still hears why


def test_an_unknown_set_key_lists_the_valid_fields_of_its_section(problems, tmp_path):
    code, _, err = trainer("run", "--preset", "cpu-smoke", "--promptset", str(problems), "--output", str(tmp_path / "o"),
                           "--set", "optimizer.learning_rat=1e-5")
    assert code == EXIT_BAD_ARGUMENTS
    line = assert_one_line(err, "optimizer.learning_rat is not a setting", "valid fields here:")
    assert "learning_rate" in line and "grad_clip" in line and "validation error" not in line


def test_the_trainer_runs_from_any_folder(tmp_path):
    code, out, _ = trainer("--help", cwd=tmp_path)
    assert code == 0 and "lean-standin" in out


def test_run_and_sft_refuse_an_attempt_below_one_in_the_same_words(tmp_path):
    refusals = []
    for command in ("run", "sft"):
        code, _, stderr = trainer(command, "--preset", "cpu-smoke", "--promptset", str(tmp_path / "problems.jsonl"),
                                  "--output", str(tmp_path / command), "--attempt", "0")
        line = assert_one_line(stderr, "--attempt", "must be 1 or more (a run's first dispatch is attempt 1), got 0")
        assert code == EXIT_BAD_ARGUMENTS
        refusals.append(line.removeprefix(f"trainer {command}"))
    assert refusals[0] == refusals[1]
    assert not (tmp_path / "run").exists() and not (tmp_path / "sft").exists()  # refused before anything started
