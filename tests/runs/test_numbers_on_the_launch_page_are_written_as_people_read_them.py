"""Numbers on the launch page are written as a person reads them: integers as integers, and no exponent at 0.001
or above (the seed's range read "0 to 2.14748e+09", issue 37); below 0.001 the shortest exact exponent form."""

import re

import pytest
from django.urls import reverse

from runs.launch_contract import describe_field, number_text

pytestmark = pytest.mark.django_db

# A number in exponent form: 2e-5, 2.14748e+09, 1E6.
EXPONENT_FORM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w.])")


@pytest.mark.parametrize("value, text", [
    (0, "0"), (2**31 - 1, "2147483647"), (20.0, "20"), (0.01, "0.01"), (0.001, "0.001"), (2.5, "2.5"),
    (2e-5, "2e-5"), (1e-8, "1e-8"), (1.5e-5, "1.5e-5"), (0.00099, "0.00099"), (1e16, "10000000000000000"),
])
def test_a_number_is_written_without_an_exponent_unless_below_0_001(value, text):
    assert number_text(value) == text


def test_prose_groups_the_thousands_of_an_integer():
    assert number_text(2**31 - 1, grouped=True) == "2,147,483,647"


def test_the_seeds_range_is_written_in_full():
    assert "0 to 2,147,483,647" in describe_field("seed") and "e+" not in describe_field("seed")


def exponent_numbers_at_or_above_a_thousandth(text: str) -> list[str]:
    return [found for found in EXPONENT_FORM.findall(text) if abs(float(found)) >= 0.001]


def test_the_rule_of_this_test_finds_what_it_should():
    assert exponent_numbers_at_or_above_a_thousandth("Allowed: 0 to 2.14748e+09; 2e-5; step 1E3") == ["2.14748e+09", "1E3"]


def test_no_number_on_the_launch_page_or_in_its_presets_data_is_in_exponent_form_at_or_above_0_001(alices_client):
    page = alices_client.get(reverse("runs:new")).content.decode()
    page = re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", page)  # a random token, not a number
    assert "launch-presets" in page
    assert exponent_numbers_at_or_above_a_thousandth(page) == []
    assert 'value="5e-6"' in page  # cpu-demo's learning rate, below 0.001: its exponent form is the readable one
