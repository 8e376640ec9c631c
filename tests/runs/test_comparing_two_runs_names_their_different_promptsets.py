"""Two runs trained on different promptsets differ in what matters most, though their configurations may match:
the compare page and the run page's "Differences from" both say so, first."""

import re

import pytest

from runs.models import Run
from runs.queries import PROMPTSET_SETTING
from tests.conftest import make_demo_promptset_version

pytestmark = pytest.mark.django_db


def diff_rows(html: str) -> list[list[str]]:
    table = re.search(r'<table[^>]*class="config-diff"[^>]*>(.*?)</table>', html, re.S)[1]
    body = re.search(r"<tbody>(.*?)</tbody>", table, re.S)[1]
    return [[" ".join(re.sub(r"<[^>]+>", " ", cell).split()) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


@pytest.fixture
def two_runs_on_two_promptsets(alice, bob, make_run):
    first = make_run(name="on arith")
    other_version = make_demo_promptset_version(bob)  # another promptset, "arith" too, with the same problems
    second = Run.objects.create(owner=alice, name="on the other", promptset_version=other_version, preset=first.preset,
                                config=first.config, state=first.state)
    return first, second


def test_the_compare_page_lists_the_promptset_versions_when_they_differ(alices_client, two_runs_on_two_promptsets):
    first, second = two_runs_on_two_promptsets
    html = alices_client.get(f"/runs/compare/?runs={first.pk}&runs={second.pk}").content.decode()
    assert diff_rows(html)[0] == [PROMPTSET_SETTING, f"arith v1 (#{first.promptset_version_id})",
                                  f"arith v1 (#{second.promptset_version_id})"]


def test_the_run_pages_differences_list_them_too(alices_client, two_runs_on_two_promptsets):
    first, second = two_runs_on_two_promptsets
    html = alices_client.get(f"/runs/{first.pk}/?diff={second.pk}").content.decode()
    assert diff_rows(html)[0][0] == PROMPTSET_SETTING


def test_runs_on_the_same_version_with_the_same_settings_are_identical(alices_client, make_run):
    first, second = make_run(name="one"), make_run(name="two")
    html = alices_client.get(f"/runs/compare/?runs={first.pk}&runs={second.pk}").content.decode()
    assert diff_rows(html) == [["Identical configurations."]]
