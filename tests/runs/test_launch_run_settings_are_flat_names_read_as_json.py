"""``FIELD=VALUE`` as ``manage.py launch_run --set`` reads it (trainer/fields.py): the launch contract's flat
fields, values as JSON where they parse, text otherwise; the launch contract then checks each one. (``leanrl``
reads the same pairs by the server's published schema instead: tests/cli/test_launch_values_are_read_by_the_
servers_schema.py.)"""

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
