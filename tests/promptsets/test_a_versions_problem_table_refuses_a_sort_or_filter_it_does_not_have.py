"""A version's problem table is sorted and filtered from the URL; a sort or filter it does not have is refused by
the API (422) and named on the page, each saying the value and the ones allowed, never silently ignored."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_api_refuses_an_unknown_sort_and_filter_naming_what_is_allowed(alices_client, promptset_version):
    url = f"/api/promptsets/{promptset_version.promptset_id}/versions/1/problems"
    sort = alices_client.get(url, {"sort": "difficulty"})
    assert sort.status_code == 422
    assert sort.json()["detail"] == ("sort='difficulty' is not a column to sort by; use one of position, attempts, "
                                     "solve_rate, last_solved, each with a leading '-' for the reverse order")
    show = alices_client.get(url, {"show": "hard"})
    assert show.status_code == 422
    assert show.json()["detail"] == "show='hard' is not a filter; use one of all, never_solved, solved, unattempted"


def test_the_page_names_the_refused_sort_and_shows_the_table_in_its_default_order(alices_client, promptset_version):
    page = alices_client.get(f"/promptsets/{promptset_version.promptset_id}/versions/1/", {"sort": "difficulty"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "sort=&#x27;difficulty&#x27; is not a column to sort by" in text
    assert text.index("add_small") < text.index("mul_small") < text.index("lt_small")


def test_a_problem_nobody_attempted_has_no_solve_rate_not_zero(alices_client, promptset_version):
    rows = alices_client.get(f"/api/promptsets/{promptset_version.promptset_id}/versions/1/problems").json()
    assert [(row["attempts"], row["solve_rate"], row["is_never_solved"]) for row in rows] == [(0, None, False)] * 3
