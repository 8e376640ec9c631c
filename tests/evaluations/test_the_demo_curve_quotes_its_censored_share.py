"""scripts/plot_demo_curve.py calls its accuracy training accuracy and quotes, beside it, how many answers
were censored and so left out of it; read from a run's events as the trainer writes them."""

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_script():
    spec = importlib.util.spec_from_file_location("plot_demo_curve", REPO / "scripts" / "plot_demo_curve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event(kind, time, **payload):
    return json.dumps({"type": kind, "time": time, "payload": payload})


def rollout(step, reward, censored):
    return event("rollout_finished", step + 0.5, step=step, turn="first", format_error=None, is_censored=censored,
                 reward=None if censored else reward)


def test_the_censored_share_is_counted_over_every_step_and_left_out_of_the_accuracy(tmp_path, capsys):
    script = load_script()
    lines = [event("run_started", 0.0), event("step_started", 1.0, step=1),
             rollout(1, 1.0, False), rollout(1, 0.0, False), rollout(1, None, True), rollout(1, None, True),
             event("metrics", 2.0, step=1, values={}),
             event("step_started", 2.0, step=2), rollout(2, 1.0, False), rollout(2, 1.0, False),
             event("metrics", 3.0, step=2, values={})]
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(lines) + "\n")
    figures = script.step_figures(events)
    assert [figure["first_accuracy"] for figure in figures] == [0.5, 1.0]  # censored answers left out
    assert script.censored_share(figures) == (2, 6)
    assert script.censored_words(figures) == "censored, left out of the accuracy: 2 of 6 answers (33.3%)"
    out = tmp_path / "curve.png"
    assert script.main(["--events", str(events), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "training accuracy counts scored answers only; censored, left out of the accuracy: 2 of 6" in printed
    assert out.stat().st_size > 0


def test_the_demo_page_calls_the_curve_training_accuracy_and_says_what_it_leaves_out():
    readme = (REPO / "docs" / "guide" / "cpu-demo.md").read_text()
    assert "first-attempt training accuracy" in readme
    assert "leaves\ncensored answers out" in readme or "leaves censored answers out" in readme.replace("\n", " ")


def test_the_demo_page_quotes_the_censored_share_of_the_run_its_picture_was_drawn_from():
    script = load_script()
    censored, answers = script.censored_share(script.step_figures(REPO / "docs" / "demo-curve-events.jsonl"))
    assert f"{censored} of the {answers} answers ({censored / answers:.1%})" in (REPO / "docs" / "guide" / "cpu-demo.md").read_text()
