"""``python -m trainer score`` and ``python -m trainer lean-standin``."""

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from trainer.__main__ import main as trainer_main
from trainer.commands import lean_standin

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
STATEMENT = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by"


def run_score(argv, capsys):
    exit_code = trainer_main(["score", *argv])
    captured = capsys.readouterr()
    return exit_code, [json.loads(line) for line in captured.out.splitlines()], captured.err


def release_shaped_answer(lean_code: str) -> str:
    """An answer the release's format checks accept: two tactics blocks that tried the final code."""
    tried = f"```tactics\n{lean_code}\n```"
    return f"<think>\nFirst try.\n{tried}\nOnce more.\n{tried}\n</think>\n```lean4\n{lean_code}\n```"


def test_score_prints_one_line_per_answer_in_input_order(standin, helpers, tmp_path, capsys):
    problem = helpers.problem().to_dict()
    answers = [
        {"problem": problem, "response": release_shaped_answer(STATEMENT + "\n  norm_num")},
        {"problem": problem, "response": release_shaped_answer(STATEMENT + "\n  linarith")},
        {"problem": problem, "response": "no code at all"},
        {"problem": problem, "response": release_shaped_answer(STATEMENT + "\n  decide\n  decide")},
    ]
    source = tmp_path / "answers.jsonl"
    source.write_text("\n".join(json.dumps(row) for row in answers) + "\n")
    exit_code, rows, err = run_score(["--input", str(source), "--url", standin.url, "--preset", "cpu-demo"], capsys)
    assert exit_code == 0
    assert [row["reward"] for row in rows] == [1.0, None, 0.0, 0.0]
    assert [row["verdict"] for row in rows] == ["valid", "infra_error", None, "lean_error"]
    assert rows[2]["format_error"] == "no_valid_lean4_code_block"
    assert rows[1]["is_censored"] and rows[0]["is_standin_verdict"]
    assert rows[3]["lean_messages"][1]["text"] == "no goals to be proved"
    assert json.loads(err.strip().splitlines()[-1])["verifier"]["censored"] == 1


def test_score_reports_a_bad_input_line_and_exits_4(tmp_path, capsys):
    source = tmp_path / "answers.jsonl"
    source.write_text('{"problem_id": "nowhere", "response": "x"}\n')
    exit_code, rows, err = run_score(["--input", str(source)], capsys)
    assert exit_code == 4  # malformed input (trainer/command_line.py lists the codes)
    assert "line 1" in err and "--problems" in err


def test_lean_standin_serves_the_kimina_api_on_the_given_port(helpers):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "trainer", "lean-standin", "--port", str(port), "--api-key", "k",
         "--latency-ms", "1", "--max-concurrency", "2", "--line-numbering", "as-sent"],
        cwd=REPOSITORY_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(url + "/health", headers={"Authorization": "Bearer k"}, trust_env=False)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "lean-standin did not start"
                time.sleep(0.1)
        assert health.json() == {"status": "ok", "standin": True}
        assert httpx.get(url + "/health", trust_env=False).status_code == 200  # as the real server: no key asked
        assert httpx.post(url + "/api/check", json={"snippets": []}, trust_env=False).status_code == 401
        code = helpers.checked("\n  norm_num\n  decide")
        [result], stats = helpers.verify(url, [code], api_key="k")
        assert result.verdict.value == "lean_error" and result.is_standin_verdict
        assert stats["line_numbering"] == "as-sent"
        assert result.errors[0].line == code.body_line + 1  # the `decide`, in lines of the checked code
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_lean_standin_refuses_a_concurrency_below_one(capsys):
    parser = argparse.ArgumentParser()
    lean_standin.add_arguments(parser)
    assert lean_standin.main(parser.parse_args(["--max-concurrency", "0"])) == 2
    assert "--max-concurrency" in capsys.readouterr().err
