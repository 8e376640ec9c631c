"""Long trainer commands show their progress on standard error: a bar on a terminal, one line per
step in a log file, read from the run's own events (which stay untouched on standard output); commands
that count items (eval's samples, demonstrations' problems) draw a bar on a terminal and nothing in a log."""

from __future__ import annotations

import io
import json

from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.observability.progress import ProgressSink


def publish_a_short_run(publisher):
    publisher.publish(EventType.RUN_STARTED, {"step": 0, "total_steps": 2, "config": {}})
    for step, reward in ((1, 0.25), (2, 0.5)):
        publisher.publish(EventType.STEP_STARTED, {"step": step})
        publisher.publish(EventType.METRICS, {"step": step, "values": {"reward/mean": reward, "format_errors": {}}})
    publisher.publish(EventType.EVALUATION, {"step": 2, "values": {"pass@1": 0.75, "seconds": 3.0}})
    publisher.publish(EventType.RUN_FINISHED, {"status": "succeeded", "reason": "", "step": 2})


def test_a_run_logged_to_a_file_prints_one_line_per_step_and_its_end(monkeypatch):
    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    events = ListSink()
    publish_a_short_run(EventPublisher("9", ProgressSink(events, "run 9")))
    lines = stderr.getvalue().splitlines()
    assert lines == ["run 9: step 1/2 reward/mean 0.25", "run 9: step 2/2 reward/mean 0.5",
                     "run 9: evaluation at step 2: pass@1 0.75", "run 9: succeeded at step 2"]
    assert [event.type for event in events.events][0] == EventType.RUN_STARTED and len(events.events) == 7


def test_a_run_on_a_terminal_draws_a_bar_that_reaches_the_last_step(terminal_stderr):
    stderr = terminal_stderr()
    publish_a_short_run(EventPublisher("9", ProgressSink(ListSink(), "run 9")))
    drawn = stderr.getvalue()
    assert "2/2" in drawn and "reward/mean 0.5" in drawn and drawn.rstrip().endswith("succeeded at step 2")


def test_the_run_command_shows_progress_beside_its_json_events(tmp_path, capsys):
    from trainer.__main__ import main as trainer_main
    from trainer.verification.standin_server import StandinServerThread

    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}) + "\n")
    with StandinServerThread() as server:
        code = trainer_main(["run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--run-id", "3",
                             "--output", str(tmp_path / "run"), "--lean-url", server.url])
    captured = capsys.readouterr()
    assert code == 0
    assert all(json.loads(line) for line in captured.out.splitlines())  # standard output stays JSON Lines
    assert "run 3: step 1/2" in captured.err and "run 3: step 2/2" in captured.err
    assert "run 3: succeeded at step 2" in captured.err


def test_the_eval_command_counts_its_scored_samples_on_a_terminal_and_keeps_standard_output_json(
        tmp_path, capsys, terminal_stderr):
    from trainer.__main__ import main as trainer_main
    from trainer.verification.standin_server import StandinServerThread

    promptset = tmp_path / "problems.jsonl"
    promptset.write_text("".join(json.dumps({"problem_id": name, "formal_statement": f"theorem {name} : (2 : ℕ) + 3 = 5 := by"})
                                 + "\n" for name in ("a", "b", "c")))
    with StandinServerThread() as server:
        assert trainer_main(["run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--run-id", "4",
                             "--output", str(tmp_path / "run"), "--lean-url", server.url,
                             "--set", "schedule.total_steps=1"]) == 0
        capsys.readouterr()
        stderr = terminal_stderr()
        code = trainer_main(["eval", "--checkpoint", str(tmp_path / "run"), "--promptset", str(promptset),
                             "--lean-url", server.url])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["samples_per_problem"] == 2
    drawn = stderr.getvalue()
    assert "eval: first attempts" in drawn and "6/6" in drawn  # three problems, two samples each, all scored


def test_the_eval_command_draws_nothing_where_standard_error_is_a_file_as_the_score_command(tmp_path, capsys):
    from trainer.__main__ import main as trainer_main
    from trainer.verification.standin_server import StandinServerThread

    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}) + "\n")
    with StandinServerThread() as server:
        assert trainer_main(["run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--run-id", "5",
                             "--output", str(tmp_path / "run"), "--lean-url", server.url,
                             "--set", "schedule.total_steps=1"]) == 0
        capsys.readouterr()
        code = trainer_main(["eval", "--checkpoint", str(tmp_path / "run"), "--promptset", str(promptset),
                             "--lean-url", server.url])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["metrics"]["problems"] == 1
    assert "eval:" not in captured.err and "\r" not in captured.err


def test_the_demonstrations_command_counts_its_problems_on_a_terminal(tmp_path, capsys, terminal_stderr):
    from trainer.__main__ import main as trainer_main

    stderr = terminal_stderr()
    assert trainer_main(["demonstrations", "--generate", "12", "--out", str(tmp_path / "demonstrations.jsonl")]) == 0
    assert "for 12 of 12 problems" in capsys.readouterr().out
    drawn = stderr.getvalue()
    assert "demonstrations" in drawn and "12/12" in drawn


def test_the_demonstrations_command_draws_nothing_where_standard_error_is_a_file(tmp_path, capsys):
    from trainer.__main__ import main as trainer_main

    assert trainer_main(["demonstrations", "--generate", "12", "--out", str(tmp_path / "demonstrations.jsonl")]) == 0
    assert capsys.readouterr().err == ""
