"""``leanrl runs launch FIELD=VALUE …`` reads each value by the type the server publishes for its field in
``/api/openapi.json`` (leanrl/assignments.py): the client imports nothing of the server, yet ``name=2024`` is
text, ``total_steps=50`` an integer, and ``kind=evaluation`` is refused naming the choices before anything is
sent. The schema here is the one the server publishes, served to the client by a stand-in transport."""

from __future__ import annotations

import functools
import json

import httpx
import pytest

from leanrl import cli
from leanrl.assignments import read_assignments
from leanrl.client import PlatformClient


@pytest.fixture
def published_schema():
    from config.api import api

    return api.get_openapi_schema()


@pytest.fixture
def server(published_schema):
    """A stand-in server: the published schema, and a launch that records the body it received."""
    launched = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/openapi.json":
            return httpx.Response(200, json=published_schema)
        launched.append(json.loads(request.content))
        return httpx.Response(201, json={"id": 7, "name": launched[-1].get("name")})

    return httpx.MockTransport(answer), launched


@pytest.fixture
def launch_fields(server):
    transport, _ = server
    return PlatformClient("http://platform.test", "token", transport=transport).body_fields("runs_api_launch_run")


@pytest.fixture
def leanrl(server, monkeypatch, capsys):
    """``leanrl`` as a person runs it, logged in to the stand-in server: (exit code, stdout, stderr, bodies sent)."""
    transport, launched = server
    monkeypatch.setenv("LEANRL_SERVER", "http://platform.test")
    monkeypatch.setenv("LEANRL_TOKEN", "token")
    monkeypatch.setattr(cli, "PlatformClient", functools.partial(PlatformClient, transport=transport))

    def run(*argv: str):
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err, launched

    return run


def test_each_value_is_read_by_its_fields_type(launch_fields):
    assert read_assignments(["name=2024", "promptset_version_id=3", "total_steps=50", "learning_rate=1e-5",
                             "temperature=1", "kind=eval", "rollout_engine=vllm", "error_correction=false",
                             'tracking=["mlflow"]', "model=SmolLM2-135M"], launch_fields) == {
        "name": "2024", "promptset_version_id": 3, "total_steps": 50, "learning_rate": 1e-5, "temperature": 1,
        "kind": "eval", "rollout_engine": "vllm", "error_correction": False, "tracking": ["mlflow"],
        "model": "SmolLM2-135M"}


def test_text_is_taken_as_written_even_where_it_would_parse_as_json(launch_fields):
    assert read_assignments(["name=my run", "model=null-model", "preset=cpu-smoke"], launch_fields) == {
        "name": "my run", "model": "null-model", "preset": "cpu-smoke"}


def test_a_field_that_may_be_null_left_blank_or_null_is_left_to_the_preset(launch_fields):
    assert read_assignments(["total_steps=", "model=null", "rollout_engine="], launch_fields) == {
        "total_steps": None, "model": None, "rollout_engine": None}


def test_a_list_is_items_separated_by_commas_or_a_json_list(launch_fields):
    assert read_assignments(["tracking=mlflow,wandb"], launch_fields) == {"tracking": ["mlflow", "wandb"]}
    assert read_assignments(['tracking=["mlflow", "tensorboard"]'], launch_fields) == {
        "tracking": ["mlflow", "tensorboard"]}
    assert read_assignments(["tracking="], launch_fields) == {"tracking": []}


def test_a_boolean_takes_the_words_the_server_takes(launch_fields):
    assert read_assignments(["error_correction=yes"], launch_fields) == {"error_correction": True}
    assert read_assignments(["error_correction=Off"], launch_fields) == {"error_correction": False}


def test_a_whole_number_written_as_a_float_is_an_integer(launch_fields):
    assert read_assignments(["total_steps=1e2"], launch_fields) == {"total_steps": 100}


@pytest.mark.parametrize(("pairs", "refusal"), [
    (["optimizer.learning_rate=1e-5"], "'optimizer.learning_rate': launch fields are flat names, not config paths"),
    (["total_steps"], "expected FIELD=VALUE, got 'total_steps'"),
    (["=3"], "expected FIELD=VALUE, got '=3'"),
    (["seed=1", "seed=2"], "seed is given twice (seed=1 and seed=2); give it once"),
    (["colour=blue"], "unknown launch field(s) colour; the server takes: name, promptset_version_id,"),
    (["kind=evaluation"], "kind takes one of rl, sft, eval; got 'evaluation'"),
    (["rollout_engine=vLLM"], "rollout_engine takes one of transformers, vllm, or blank for the default; got 'vLLM'"),
    (["total_steps=5.5"], "total_steps takes an integer, or blank for the default; got '5.5'"),
    (["total_steps=true"], "total_steps takes an integer, or blank for the default; got 'true'"),
    (["learning_rate=fast"], "learning_rate takes a number, or blank for the default; got 'fast'"),
    (["learning_rate=NaN"], "learning_rate takes a number, or blank for the default; got 'NaN'"),
    (["error_correction=maybe"], "error_correction takes true or false, or blank for the default; got 'maybe'"),
    (["tracking=mlflow,neptune"], "tracking takes a list (separated by commas, or as JSON), each item one of "
                                  "wandb, mlflow, tensorboard; got 'mlflow,neptune'"),
    (["promptset_version_id="], "promptset_version_id takes an integer; got ''"),
])
def test_a_malformed_pair_an_unknown_field_or_a_value_of_the_wrong_type_is_refused_saying_what_it_takes(
        launch_fields, pairs, refusal):
    with pytest.raises(ValueError) as refused:
        read_assignments(pairs, launch_fields)
    assert refusal in str(refused.value)


def test_the_launch_sends_the_typed_body(leanrl):
    code, out, err, launched = leanrl("runs", "launch", "name=2024", "promptset_version_id=3", "preset=cpu-smoke",
                                      "learning_rate=1e-5", "tracking=mlflow")
    assert (code, err) == (0, "")
    assert launched == [{"name": "2024", "promptset_version_id": 3, "preset": "cpu-smoke", "learning_rate": 1e-5,
                         "tracking": ["mlflow"]}]
    assert out.startswith("run 7 '2024' queued")


def test_a_value_of_the_wrong_type_is_a_usage_error_and_nothing_is_sent(leanrl):
    code, _, err, launched = leanrl("runs", "launch", "name=x", "promptset_version_id=3", "kind=evaluation")
    assert code == cli.EXIT_USAGE and launched == []
    assert err == ("leanrl: kind takes one of rl, sft, eval; got 'evaluation' (see `leanrl runs launch --fields`)\n")


def test_the_field_list_says_what_each_field_takes(leanrl):
    code, out, _, _ = leanrl("runs", "launch", "--fields")
    rows = {line.split("\t")[0]: line.split("\t")[1:3] for line in out.splitlines()}
    assert code == 0
    assert rows["name"] == ["text", "required"]
    assert rows["kind"] == ["one of rl, sft, eval", 'default "rl"']
    assert rows["total_steps"] == ["an integer, or blank for the default", "default null"]
