"""``FIELD=VALUE`` as ``leanrl runs launch`` and ``manage.py launch_run --set`` read it: the launch
contract's flat fields, values as JSON where they parse, without Django or torch. The reading is the
trainer's (trainer/fields.py, standard library only): the client loads that one module of it."""

import subprocess
import sys

import pytest

from trainer.fields import parse_assignments


def test_values_are_json_where_they_parse_and_text_otherwise():
    assert parse_assignments(["name=my run", "total_steps=50", "learning_rate=1e-5", 'tracking=["mlflow"]',
                              "model=SmolLM2-135M"]) == {
        "name": "my run", "total_steps": 50, "learning_rate": 1e-5, "tracking": ["mlflow"], "model": "SmolLM2-135M"}


@pytest.mark.parametrize(("pairs", "refusal"), [
    (["optimizer.learning_rate=1e-5"], "'optimizer.learning_rate': launch fields are flat names, not config paths"),
    (["total_steps"], "expected FIELD=VALUE, got 'total_steps'"),
    (["=3"], "expected FIELD=VALUE, got '=3'"),
    (["seed=1", "seed=2"], "seed is given twice (seed=1 and seed=2); give it once"),
])
def test_a_dotted_path_a_missing_value_or_a_repeated_field_is_refused(pairs, refusal):
    with pytest.raises(ValueError) as refused:
        parse_assignments(pairs)
    assert refusal in str(refused.value)


def test_the_client_imports_without_django_or_torch_and_only_the_trainers_field_reading():
    loads = ("import sys; sys.modules.update(django=None, torch=None, runs=None); import leanrl.cli; "
             "print(sorted(name for name in sys.modules if name.split('.')[0] == 'trainer'))")
    result = subprocess.run([sys.executable, "-c", loads], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["['trainer',", "'trainer.fields']"]
