"""``python -m trainer step-time --preset NAME [--set …] [--json]``: η = 0, 1, 2 by default, every input with
its source, the recipe's pace beside h100x8's prediction, and each mistake one line with its exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.__main__ import main as trainer_main
from trainer.command_line import EXIT_BAD_ARGUMENTS, EXIT_MALFORMED_INPUT, EXIT_MISSING_FILE

REPO = Path(__file__).resolve().parents[2]


def step_time(capsys, *argv: str) -> tuple[int, str, str]:
    code = trainer_main(["step-time", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_gives_each_eta_its_step_time_and_idle_shares_and_each_input_its_source(capsys):
    code, out, _ = step_time(capsys, "--preset", "cpu-demo", "--json", "--steps", "10")
    assert code == 0
    report = json.loads(out)
    assert report["preset"] == "cpu-demo"
    assert "prediction" in report["what"]
    assert [row["max_staleness"] for row in report["predictions"]] == [0, 1, 2]
    for row in report["predictions"]:
        assert row["runs"] is True
        assert row["step_time_s"] > 0
        for share in ("generation_idle_share", "learner_idle_share", "gpu_idle_share"):
            assert 0 <= row[share] <= 1
        assert row["layout"]["shared"] is True and "CPU" in row["layout"]["note"]
    assert report["inputs"], "no inputs listed"
    for name, item in report["inputs"].items():
        assert item["source"].split(":")[0] in {"measured", "config", "published", "assumed", "given on the command line"}, name
    assert "docs/demo-curve-events.jsonl" in report["inputs"]["decode_tokens_per_s_per_sequence"]["source"]
    assert report["recipe"] is None


def test_h100x8_is_set_beside_the_recipes_34_minutes_a_step(capsys):
    code, out, _ = step_time(capsys, "--preset", "h100x8", "--json", "--steps", "6",
                             "--set", "cluster.rollout_gpus=4")
    assert code == 0
    report = json.loads(out)
    assert report["recipe"]["step_time_s"] == pytest.approx(48 * 3600 / 85, abs=1)
    assert "85 steps in 48 hours" in report["recipe"]["source"]
    layouts = {row["max_staleness"]: row["layout"] for row in report["predictions"]}
    assert (layouts[1]["generation_devices"], layouts[1]["learner_devices"], layouts[1]["shared"]) == (4, 4, False)
    sources = " ".join(item["source"] for item in report["inputs"].values())
    assert "gpustack" in sources and "H100 SXM datasheet" in sources and "memory-plan --preset h100x8" in sources


def test_the_table_says_it_is_a_prediction_and_how_to_rerun_it(capsys):
    code, out, _ = step_time(capsys, "--preset", "cpu-smoke", "--steps", "4", "--lean-mean-s", "1.5",
                             "--lean-reach-share", "0.8", "--set", "verifier.max_in_flight=4")
    assert code == 0
    assert "PREDICTED" in out
    assert "rerun: python -m trainer step-time --preset cpu-smoke --set verifier.max_in_flight=4 --lean-mean-s 1.5 " \
           "--lean-reach-share 0.8" in out
    assert "given on the command line: log-normal, mean 1.5 s" in out


def test_the_configs_own_eta_is_predicted_too(capsys):
    code, out, _ = step_time(capsys, "--preset", "cpu-smoke", "--json", "--steps", "4", "--set", "rollout.max_staleness=3")
    assert code == 0
    assert [row["max_staleness"] for row in json.loads(out)["predictions"]] == [0, 1, 2, 3]


def test_a_layout_that_cannot_run_asynchronously_says_why(capsys):
    code, out, _ = step_time(capsys, "--preset", "h100x8", "--json", "--steps", "4", "--set", "cluster.num_gpus=1")
    assert code == 0
    rows = {row["max_staleness"]: row for row in json.loads(out)["predictions"]}
    assert rows[0]["runs"] is True
    assert rows[1]["runs"] is False and "one GPU" in rows[1]["reason"]


@pytest.mark.parametrize("argv, fragment", [
    (["--preset", "cpu-demo", "--eta", "-1"], "--eta '-1': η is 0 or more"),
    (["--preset", "cpu-demo", "--eta", "one"], "--eta 'one': give whole numbers"),
    (["--preset", "cpu-demo", "--steps", "1"], "--steps 1"),
    (["--preset", "no-such-preset"], "unknown preset 'no-such-preset'"),
    (["--preset", "cpu-demo", "--set", "rollout.max_staleness=-1"], "rollout.max_staleness"),
    (["--preset", "cpu-demo", "--set", "rollout.no_such_field=1"], "rollout.no_such_field is not a setting"),
    (["--preset", "cpu-demo", "--lean-timeout-share", "2"], "between 0 and 1, got 2"),
    (["--preset", "cpu-demo", "--lean-mean-s", "-1"], "0 or more"),
    (["--preset", "cpu-demo", "--lean-reach-share", "1.5"], "--lean-reach-share 1.5"),
    (["--preset", "h100x8", "--set", "cluster.rollout_gpus=8"], "leaves no learner GPU"),
])
def test_a_bad_option_is_one_line_and_exit_code_2(capsys, argv, fragment):
    code, out, err = step_time(capsys, *argv)
    assert code == EXIT_BAD_ARGUMENTS, err
    assert out == ""
    lines = [line for line in err.splitlines() if line.startswith("trainer step-time: ")]
    assert len(lines) == 1 and fragment in lines[0], err


def test_calibrating_against_a_missing_or_malformed_events_file_says_which(capsys, tmp_path):
    code, _, err = step_time(capsys, "--calibrate", str(tmp_path / "absent.jsonl"))
    assert code == EXIT_MISSING_FILE and "no such file" in err
    not_json = tmp_path / "not-json.jsonl"
    not_json.write_text('{"type": "run_started"}\nnot json\n')
    code, _, err = step_time(capsys, "--calibrate", str(not_json))
    assert code == EXIT_MALFORMED_INPUT and "line 2: not JSON" in err
    no_run = tmp_path / "no-run.jsonl"
    no_run.write_text(json.dumps({"type": "metrics", "payload": {"step": 1, "values": {}}}) + "\n")
    code, _, err = step_time(capsys, "--calibrate", str(no_run))
    assert code == EXIT_MALFORMED_INPUT and "no run_started event" in err
    no_time_splits = tmp_path / "no-time-splits.jsonl"
    no_time_splits.write_text("".join(json.dumps(event) + "\n" for event in [
        {"type": "run_started", "attempt": 1, "time": 0.0, "payload": {"config": {}}},
        *({"type": "metrics", "attempt": 1, "time": float(step), "payload": {"step": step, "values": {}}} for step in (1, 2, 3)),
    ]))
    code, _, err = step_time(capsys, "--calibrate", str(no_time_splits))
    assert code == EXIT_MALFORMED_INPUT and "lack time/generation_s" in err


def test_the_model_imports_neither_torch_nor_django():
    program = ("import sys; from trainer.__main__ import main; "
               "code = main(['step-time', '--preset', 'cpu-smoke', '--steps', '3', '--json']); "
               "assert code == 0; "
               "print(sorted(name for name in ('torch', 'django', 'transformers') if name in sys.modules))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
