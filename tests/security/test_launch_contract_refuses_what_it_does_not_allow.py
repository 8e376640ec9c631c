"""The launch contract, attacked through both doors: the form and POST /api/runs/ refuse the same things,
each with an error on the field at fault, and store nothing."""

import pytest
from django.urls import reverse

from runs.launch_contract import PRESET_BOUNDS, SETTABLE_FIELDS, bounds, unknown_field_message
from runs.models import Run
from trainer.config import PRESETS, RunConfig

pytestmark = pytest.mark.django_db

PATH_LIKE_MODELS = [
    "/data/artifacts/runs/7/checkpoints/step_000005/model", "../runs/7/checkpoints", "AI-MO/Kimina-Prover-Distill-1.7B",
    "file:///etc/passwd", "~bob/model", "s3://bucket/model", "C:\\models\\x", "runs/7", ".hidden",
]
UNKNOWN_FIELDS = {
    "overrides": {"verifier": {"max_in_flight": 100000}},
    "verifier": {"timeout_s": 1e9},
    "max_in_flight": 100000,
    "timeout_s": 1e9,
    "init_checkpoint": "/data/artifacts/runs/7/checkpoints/step_000005/model",
    "name_or_path": "/data/artifacts/runs/7",
    "num_gpus": 64,
}


def out_of_bounds():
    for preset in PRESETS:
        for field, bound in bounds(preset).items():
            kind = SETTABLE_FIELDS[field].kind
            above = bound.high * 10 if kind is float else int(bound.high) + 1
            below = bound.low / 10 if kind is float and bound.low > 0 else (bound.low - 1 if kind is int else -1.0)
            yield pytest.param(preset, field, above, id=f"{preset}-{field}-above")
            yield pytest.param(preset, field, below, id=f"{preset}-{field}-below")


def api_launch(client, version, **fields):
    body = {"name": "attack", "promptset_version_id": version.pk, "preset": "cpu-smoke", **fields}
    return client.post("/api/runs/", body, content_type="application/json")


def form_launch(client, version, **fields):
    data = {"name": "attack", "promptset_version": version.pk, "preset": "cpu-smoke", "kind": "rl", **fields}
    return client.post(reverse("runs:new"), data)


def form_errors(response):
    assert response.status_code == 200, "the form did not come back with errors"
    return response.context["form"].errors


def test_every_presets_own_values_lie_within_its_bounds():
    for preset in PRESETS:
        assert set(PRESET_BOUNDS[preset]) >= set(SETTABLE_FIELDS), preset
        config = RunConfig.from_preset(preset).model_dump()
        for field, bound in bounds(preset).items():
            section, name = SETTABLE_FIELDS[field].section, SETTABLE_FIELDS[field].field
            value = config[section][name]
            assert value is None or bound.low <= value <= bound.high, (preset, field, value)


@pytest.mark.parametrize(("preset", "field", "value"), list(out_of_bounds()))
def test_a_value_out_of_the_presets_bounds_is_a_field_error_in_the_form_and_the_api(
        client, alice, promptset_version, dispatched, preset, field, value):
    client.force_login(alice)
    api = api_launch(client, promptset_version, preset=preset, **{field: value})
    assert api.status_code == 422 and f"for the {preset} preset" in api.json()["field_errors"][field][0]
    form = form_errors(form_launch(client, promptset_version, preset=preset, **{field: value}))
    assert f"for the {preset} preset" in form[field][0]
    assert Run.objects.count() == 0 and dispatched == []


@pytest.mark.parametrize("model", PATH_LIKE_MODELS)
def test_a_model_named_by_a_path_is_a_field_error_in_the_form_and_the_api(
        client, alice, promptset_version, dispatched, model):
    client.force_login(alice)
    api = api_launch(client, promptset_version, model=model)
    assert api.status_code == 422 and "model" in api.json()["field_errors"]
    assert "exist" not in api.json()["field_errors"]["model"][0]  # never says whether a path exists
    assert "model" in form_errors(form_launch(client, promptset_version, model=model))
    assert Run.objects.count() == 0


def test_a_registered_model_is_accepted_by_name(client, alice, promptset_version, dispatched):
    client.force_login(alice)
    assert api_launch(client, promptset_version, model="tiny-random-llama").status_code == 201
    assert Run.objects.get().config["model"]["source"] == "tiny_random"


@pytest.mark.parametrize("checkpoint", ["/data/artifacts/runs/7/checkpoints/step_000005", "../7", "7/model"])
def test_a_checkpoint_named_by_a_path_is_a_field_error_in_the_form_and_the_api(
        client, alice, promptset_version, dispatched, checkpoint):
    client.force_login(alice)
    api = api_launch(client, promptset_version, starting_checkpoint_id=checkpoint)
    assert api.status_code == 422 and "starting_checkpoint_id" in api.json()["field_errors"]
    assert "starting_checkpoint" in form_errors(form_launch(client, promptset_version, starting_checkpoint=checkpoint))
    assert Run.objects.count() == 0


def test_someone_elses_checkpoint_is_a_field_error_that_does_not_say_it_exists(
        client, charlie, make_run, promptset_version, dispatched):
    promptset_version.promptset.is_public = True
    promptset_version.promptset.save()
    checkpoint = make_run(state="succeeded").checkpoints.create(step=1, path="/x")
    client.force_login(charlie)
    api = api_launch(client, promptset_version, starting_checkpoint_id=checkpoint.pk)
    missing = api_launch(client, promptset_version, starting_checkpoint_id=checkpoint.pk + 1000)
    assert api.status_code == missing.status_code == 422
    assert api.json()["field_errors"]["starting_checkpoint_id"][0].replace(str(checkpoint.pk), "N") == \
        missing.json()["field_errors"]["starting_checkpoint_id"][0].replace(str(checkpoint.pk + 1000), "N")
    assert "starting_checkpoint" in form_errors(form_launch(client, promptset_version, starting_checkpoint=checkpoint.pk))
    assert Run.objects.filter(owner=charlie).count() == 0


@pytest.mark.parametrize("field", list(UNKNOWN_FIELDS))
def test_a_field_not_in_the_contract_is_refused_by_name_never_ignored(
        client, alice, promptset_version, dispatched, field):
    client.force_login(alice)
    api = api_launch(client, promptset_version, **{field: UNKNOWN_FIELDS[field]})
    assert api.status_code == 422 and api.json()["field_errors"][field] == [unknown_field_message(field)]
    form = form_launch(client, promptset_version, **{field: str(UNKNOWN_FIELDS[field])})
    assert unknown_field_message(field) in form_errors(form)["__all__"]  # word for word, as the API says it
    assert Run.objects.count() == 0


def test_a_201_character_name_is_a_field_error_not_a_500(client, alice, promptset_version, dispatched):
    client.force_login(alice)
    api = api_launch(client, promptset_version, name="x" * 201)
    assert api.status_code == 422 and "at most 200 characters" in api.json()["field_errors"]["name"][0]
    assert "name" in form_errors(form_launch(client, promptset_version, name="x" * 201))


def test_the_api_never_returns_the_lean_servers_address(client, alice, promptset_version, dispatched, settings):
    client.force_login(alice)
    created = api_launch(client, promptset_version).json()
    assert "url" not in created["config"]["verifier"]
    assert settings.LEAN_SERVER_URL not in client.get(f"/api/runs/{created['id']}").content.decode()
    assert settings.LEAN_SERVER_URL not in client.get("/api/runs/").content.decode()
    assert settings.LEAN_SERVER_URL not in client.get(reverse("runs:detail", args=[created["id"]])).content.decode()
    assert Run.objects.get().config["verifier"]["url"] == settings.LEAN_SERVER_URL  # the trainer still gets it


def test_the_verifiers_concurrency_and_timeout_are_the_presets(client, alice, promptset_version, dispatched):
    client.force_login(alice)
    api_launch(client, promptset_version, preset="cpu-demo", total_steps=3)
    stored = Run.objects.get().config["verifier"]
    assert (stored["max_in_flight"], stored["timeout_s"]) == (8, 20.0)


def test_the_command_line_launches_through_the_same_contract(alice, promptset_version, dispatched, capsys):
    from django.core.management import CommandError, call_command

    call_command("launch_run", "alice", "--name", "cli run", "--promptset-version", str(promptset_version.pk),
                 "--preset", "cpu-smoke", "--set", "total_steps=3")
    assert Run.objects.get().config["schedule"]["total_steps"] == 3
    with pytest.raises(CommandError, match=r"max_in_flight: 'max_in_flight' is not a launch field"):
        call_command("launch_run", "alice", "--name", "x", "--promptset-version", str(promptset_version.pk),
                     "--set", "max_in_flight=100000")
    with pytest.raises(CommandError, match=r"total_steps: must be from 1 to 20 for the cpu-smoke preset"):
        call_command("launch_run", "alice", "--name", "x", "--promptset-version", str(promptset_version.pk),
                     "--preset", "cpu-smoke", "--set", "total_steps=21")
    assert Run.objects.count() == 1


@pytest.mark.parametrize(("setting", "refusal"), [
    ("optimizer.learning_rate=1e-5", "launch fields are flat names, not config paths"),
    ("total_steps", "expected FIELD=VALUE"),
])
def test_the_command_line_refuses_a_config_path_a_bare_name_or_a_setting_given_twice(alice, promptset_version, setting, refusal):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=f"--set .*{refusal}"):
        call_command("launch_run", "alice", "--name", "x", "--promptset-version", str(promptset_version.pk),
                     "--set", setting)
    with pytest.raises(CommandError, match="total_steps is given twice"):
        call_command("launch_run", "alice", "--name", "x", "--promptset-version", str(promptset_version.pk),
                     "--set", "total_steps=3", "--set", "total_steps=4")
    assert Run.objects.count() == 0


def test_the_published_schema_describes_every_settable_field_with_its_bounds(client, alice):
    client.force_login(alice)
    schema = client.get("/api/openapi.json").json()
    launch = schema["paths"]["/api/runs/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    while "$ref" in launch:
        launch = schema["components"]["schemas"][launch["$ref"].rsplit("/", 1)[-1]]
    for field, settable in SETTABLE_FIELDS.items():
        description = launch["properties"][field]["description"]  # what `leanrl runs launch --fields` prints
        assert description.startswith(settable.meaning), field
        assert all(f"{preset} {bound.describe()}" in description for preset, bound in
                   ((preset, PRESET_BOUNDS[preset][field]) for preset in PRESETS)), field
    assert launch["additionalProperties"] is False
