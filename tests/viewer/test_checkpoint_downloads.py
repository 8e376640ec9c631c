"""A checkpoint downloads as a zip streamed from its folder; only folders under the artifacts folder are offered."""

import io
import zipfile

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db


@pytest.fixture
def checkpoint(make_run):
    run = make_run(state="running")
    folder = settings.ARTIFACTS_DIR / "runs" / str(run.pk) / "checkpoints" / "step_000005"
    (folder / "model").mkdir(parents=True, exist_ok=True)
    (folder / "model" / "config.json").write_text('{"model_type": "llama"}')
    (folder / "trainer_state.json").write_text('{"step": 5}')
    return run.checkpoints.create(step=5, path=str(folder))


def download(client, checkpoint, part):
    response = client.get(f"/runs/{checkpoint.run_id}/checkpoints/5/{part}.zip")
    assert response.status_code == 200
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


def test_the_whole_checkpoint_downloads_as_a_zip(checkpoint, alice, logged_in):
    archive = download(logged_in(alice), checkpoint, "checkpoint")
    assert sorted(archive.namelist()) == ["model/config.json", "trainer_state.json"]
    assert archive.read("trainer_state.json") == b'{"step": 5}'


def test_the_model_export_holds_only_the_hugging_face_folder(checkpoint, alice, logged_in):
    assert download(logged_in(alice), checkpoint, "model").namelist() == ["config.json"]


def test_a_checkpoint_outside_the_artifacts_folder_is_refused(make_run, alice, logged_in):
    run = make_run()
    run.checkpoints.create(step=1, path="/etc")
    assert logged_in(alice).get(f"/runs/{run.pk}/checkpoints/1/checkpoint.zip").status_code == 404
