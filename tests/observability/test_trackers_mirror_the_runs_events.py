"""A run with tracking on shows, in W&B (offline), MLflow (a local store) and TensorBoard (event
files), the same step metrics as its own events, its config, and sample tables of rollouts; a
tracker that fails is switched off and the run goes on."""

from __future__ import annotations

import json

import pytest

from tests.observability import wandb_offline
from trainer.__main__ import main as trainer_main
from trainer.observability.tracking import TensorBoardTracker, TrackingSink, local_mlflow_uri, scalars
from trainer.verification.standin_server import StandinServerThread


def events_from(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def run_with_tracking(tmp_path, capsys, backends: list[str], monkeypatch, **environment) -> tuple[int, list[dict]]:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    if "MLFLOW_TRACKING_URI" not in environment:
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"})
                         + "\n")
    with StandinServerThread() as server:
        code = trainer_main([
            "run", "--preset", "cpu-demo", "--promptset", str(promptset), "--output", str(tmp_path / "run"),
            "--run-id", "7", "--lean-url", server.url, "--set", "model.source=tiny_random",
            "--set", "rollout.engine=transformers", "--set", "rollout.prompts_per_step=2", "--set", "rollout.samples_per_prompt=2",
            "--set", "rollout.max_response_tokens=4", "--set", "schedule.total_steps=2",
            "--set", "schedule.eval_every=0", "--set", "schedule.checkpoint_every=0",
            "--set", f"tracking.backends={json.dumps(backends)}", "--set", "tracking.rollout_table_every=2",
            "--set", "tracking.rollout_table_rows=3",
        ])
    return code, events_from(capsys.readouterr().out)


def step_scalars(events: list[dict]) -> dict[int, dict[str, float]]:
    return {event["payload"]["step"]: scalars(event["payload"]["values"])
            for event in events if event["type"] == "metrics"}


def test_every_tracker_holds_the_same_step_metrics_config_and_rollout_tables_as_the_run(tmp_path, capsys, monkeypatch):
    code, events = run_with_tracking(tmp_path, capsys, ["wandb", "mlflow", "tensorboard"], monkeypatch)
    assert code == 0
    expected = step_scalars(events)
    assert sorted(expected) == [1, 2] and "learner/loss" in expected[1]
    tracking = {event["payload"]["backend"]: event["payload"] for event in events if event["type"] == "tracking"}
    assert set(tracking) == {"wandb", "mlflow", "tensorboard"}
    assert all(payload["error"] == "" for payload in tracking.values())

    # TensorBoard: event files read back with TensorBoard's own reader.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    board = EventAccumulator(str(tmp_path / "run" / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    board.Reload()
    for step, values in expected.items():
        for name, value in values.items():
            logged = {event.step: event.value for event in board.Scalars(name)}
            assert logged[step] == pytest.approx(value, rel=1e-6), (name, step)
    texts = {tag: board.Tensors(tag) for tag in board.Tags()["tensors"]}
    assert any(tag.startswith("config") for tag in texts) and any(tag.startswith("rollout_samples") for tag in texts)
    assert tracking["tensorboard"]["location"] == str(tmp_path / "run" / "tensorboard")

    # MLflow: the local store, through MLflow's client.
    from mlflow.tracking import MlflowClient

    store = MlflowClient(tracking_uri=local_mlflow_uri(tmp_path / "run"))
    [mlflow_run] = store.search_runs([store.get_experiment_by_name("lean-rl").experiment_id])
    assert mlflow_run.info.run_name == "run-7" and mlflow_run.info.status == "FINISHED"
    assert mlflow_run.data.params["rollout.samples_per_prompt"] == "2"
    for step, values in expected.items():
        for name, value in values.items():
            history = {metric.step: metric.value for metric in store.get_metric_history(mlflow_run.info.run_id, name)}
            assert history[step] == pytest.approx(value, rel=1e-6), (name, step)
    table_file = store.download_artifacts(mlflow_run.info.run_id, "rollout_samples/step_000002.json", str(tmp_path))
    table = json.loads(open(table_file).read())
    assert table["columns"][:3] == ["step", "problem", "turn"] and len(table["data"]) == 3

    # W&B offline: its transaction log read back.
    [wandb_folder] = (tmp_path / "run" / "wandb" / "wandb").glob("offline-run-*")
    rows = {row["_step"]: row for row in wandb_offline.history(wandb_folder)}
    for step, values in expected.items():
        for name, value in values.items():
            assert rows[step][name] == pytest.approx(value, rel=1e-6), (name, step)
    assert rows[2]["rollout_samples/_type"] == "table-file" and rows[2]["rollout_samples/nrows"] == 3
    assert "rollout_samples/_type" not in rows[1]  # tables every 2 steps
    assert wandb_offline.config(wandb_folder)["rollout"]["samples_per_prompt"] == 2


def test_a_tracker_that_cannot_reach_its_server_is_switched_off_and_the_run_succeeds(tmp_path, capsys, monkeypatch):
    from deploy.services import free_port

    code, events = run_with_tracking(
        tmp_path, capsys, ["mlflow", "tensorboard"], monkeypatch,
        MLFLOW_TRACKING_URI=f"http://127.0.0.1:{free_port()}", MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
        MLFLOW_HTTP_REQUEST_TIMEOUT="2",
    )
    assert code == 0
    assert events[-1]["type"] == "run_finished" and events[-1]["payload"]["status"] == "succeeded"
    tracking = {event["payload"]["backend"]: event["payload"] for event in events if event["type"] == "tracking"}
    assert tracking["mlflow"]["error"].startswith("switched off after an error")
    assert tracking["tensorboard"]["error"] == ""


class RecordingTracker:
    backend = TensorBoardTracker.backend
    location = "memory"

    def __init__(self):
        self.tables = []

    def start(self, config):
        pass

    def log_scalars(self, step, values):
        pass

    def log_table(self, step, rows):
        self.tables.append((step, rows))

    def finish(self, status):
        pass


def test_a_censored_rollout_has_an_empty_reward_cell_not_zero():
    from trainer.observability.events import ListSink, TrainerEvent

    tracker = RecordingTracker()
    sink = TrackingSink(ListSink(), [tracker], table_every=1, table_rows=4)
    for index, reward in enumerate((None, 0.0)):
        sink.write(TrainerEvent(run_id="1", seq=index, type="rollout_finished",
                                payload={"step": 1, "problem_id": "p", "reward": reward, "verdict": "lean_error"}))
    sink.write(TrainerEvent(run_id="1", seq=3, type="metrics", payload={"step": 1, "values": {"reward/mean": 0.0}}))
    [(step, rows)] = tracker.tables
    assert step == 1 and [row["reward"] for row in rows] == ["", 0.0]


def test_a_rollout_table_holds_the_steps_training_rollouts_never_its_evaluations_samples():
    from trainer.observability.events import ListSink, TrainerEvent

    tracker = RecordingTracker()
    sink = TrackingSink(ListSink(), [tracker], table_every=1, table_rows=4)
    for index, is_evaluation in enumerate((True, False, True)):
        sink.write(TrainerEvent(run_id="1", seq=index, type="rollout_finished", payload={
            "step": 1, "problem_id": f"p{index}", "reward": 0.0, "is_evaluation": is_evaluation}))
    sink.write(TrainerEvent(run_id="1", seq=3, type="metrics", payload={"step": 1, "values": {"reward/mean": 0.0}}))
    [(step, rows)] = tracker.tables
    assert step == 1 and [row["problem"] for row in rows] == ["p1"]


def test_tensorboard_tables_escape_model_output(tmp_path):
    tracker = TensorBoardTracker("p", "r", tmp_path)
    tracker.start({})
    row = {"step": 1, "problem": "p", "turn": "first", "prompt": "", "reasoning": "<script>x</script>",
           "lean_code": "a | b", "verdict": "valid", "reward": 1.0}
    tracker.log_table(1, [row])
    tracker.finish("succeeded")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    board = EventAccumulator(str(tmp_path / "tensorboard"))
    board.Reload()
    [text] = board.Tensors("rollout_samples/text_summary")
    markdown = text.tensor_proto.string_val[0].decode()
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown and "a &#124; b" in markdown
