"""The run page links each tracker's run (or names its offline folder, or says why it stopped) and
the run's job in Ray's dashboard; tracker text is escaped like all the trainer's output."""

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db


def add_tracking_event(run, seq, **payload):
    run.events.create(event_id=f"t{seq}", seq=seq, run_seq=seq, type="tracking", payload=payload, published_at=timezone.now())


def test_the_run_page_links_trackers_and_the_ray_job(client, alice, make_run, settings):
    settings.RAY_DASHBOARD_URL = "https://ray.lab.example"
    run = make_run(state="running", ray_job_id="run-1-attempt-1")
    add_tracking_event(run, 1, backend="wandb", location="https://wandb.ai/lab/lean-rl/runs/abc", error="")
    add_tracking_event(run, 2, backend="tensorboard", location="/artifacts/1/tensorboard", error="")
    add_tracking_event(run, 3, backend="mlflow", location="http://mlflow:5000", error="")
    add_tracking_event(run, 4, backend="mlflow", location="http://mlflow:5000",
                       error="switched off after an error: <ConnectError>")
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'href="https://ray.lab.example/#/jobs/run-1-attempt-1"' in page
    assert 'Weights &amp; Biases: <a href="https://wandb.ai/lab/lean-rl/runs/abc"' in page
    assert "TensorBoard: <code>/artifacts/1/tensorboard</code>" in page
    assert "MLflow: <span class=\"warning\">switched off after an error: &lt;ConnectError&gt;</span>" in page


def test_no_dashboard_link_when_the_deployment_gives_no_dashboard_url(client, alice, make_run, settings):
    settings.RAY_DASHBOARD_URL = ""
    run = make_run(state="running", ray_job_id="run-1-attempt-1")
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "<code>run-1-attempt-1</code>" in page and 'id="ray-job-link"' not in page
