"""Promptset pages say what they do (issue 14): split parts named and the training part offered
first, a sample larger than the set refused, Parquet known by its magic bytes, an upload error said
once, the column mapping laid out, checkboxes beside their labels."""

import re

import pytest

from promptsets.models import Promptset
from tests.browser.conftest import forget_refused_load, log_in, screenshot, upload_promptset
from tests.promptsets.conftest import encode, kimina_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_split_names_its_parts_and_a_launch_offers_the_training_part_first(page, alice, promptset_version):
    promptset = promptset_version.promptset
    log_in(page, "alice", "alice-password")
    page.goto(f"/promptsets/{promptset.pk}/versions/1/")
    page.click(".curation summary")
    page.select_option("#id_kind", "split")
    page.fill("#id_eval_fraction", "0.34")
    page.click(".curation button[type=submit]")
    page.wait_for_url(re.compile(r"/versions/2/$"))
    assert "required" not in page.locator("main").inner_text(), "the split form said 'required' for a filled field"

    page.goto("/promptsets/")
    headline = page.locator("tbody tr").first.locator("td").nth(2).inner_text()
    assert headline.startswith("v2 (train part)"), f"the list's headline version is {headline!r}, not the train part"
    page.goto(f"/promptsets/{promptset.pk}/")
    heading = page.locator("h2", has_text="Problems of").inner_text()
    assert "v2 (train part)" in heading and "v3" not in heading, f"the detail page leads with {heading!r}"
    versions = page.locator("table.versions").inner_text()
    assert "held-out eval part" in versions and "train part" in versions, "the versions table does not name the parts"

    page.goto("/runs/new/")
    options = page.locator("#id_promptset_version option").all_inner_texts()
    assert options[1] == "arith v2 (train part)", f"a launch offers {options[1]!r} first"
    assert options[-1] == "arith v3 (held-out eval part)", f"the eval part is not named last: {options}"


def test_a_sample_larger_than_the_version_is_refused_and_says_how_many_there_are(page, alice, promptset_version):
    promptset = promptset_version.promptset
    log_in(page, "alice", "alice-password")
    page.goto(f"/promptsets/{promptset.pk}/versions/1/")
    page.click(".curation summary")
    page.select_option("#id_kind", "sample")
    page.fill("#id_count", "1000")
    with page.expect_navigation():
        page.click(".curation button[type=submit]")
    forget_refused_load(page, 400)
    text = page.locator(".curation").inner_text()
    assert "has 3 problems" in text and "at most 3" in text, f"a sample of 1000 from 3 said {text!r}"
    assert promptset.versions.count() == 1, "a 'sample of 1000' version holding all 3 was made"


def test_a_parquet_file_named_jsonl_is_read_as_parquet(page, alice, tmp_path):
    misnamed = tmp_path / "kimina.jsonl"
    misnamed.write_bytes(encode(kimina_rows(4), "parquet"))
    log_in(page, "alice", "alice-password")
    upload_promptset(page, "misnamed", misnamed)
    version = Promptset.objects.get(name="misnamed").versions.get()
    assert version.problem_count == 4 and version.rule["file_format"] == "parquet"


def test_an_upload_error_is_said_once_beside_a_laid_out_column_mapping_and_checkboxes_sit_by_their_labels(
        page, alice, tmp_path):
    unreadable = tmp_path / "rows.txt"
    unreadable.write_bytes(b"this is not a promptset\n")
    log_in(page, "alice", "alice-password")
    page.goto("/promptsets/upload/")
    for checkbox in ("#id_is_public", "#id_skip_invalid_rows"):
        box = page.locator(checkbox).bounding_box()
        label = page.locator(f"label[for={checkbox[1:]}]").bounding_box()
        assert box["x"] <= label["x"] + 2 and abs((box["y"] + box["height"] / 2) - (label["y"] + label["height"] / 2)) < 8, \
            f"{checkbox} is not beside its label: {box} vs {label}"
    page.fill("#id_name", "unreadable")
    page.set_input_files("#id_file", str(unreadable))
    page.click("#promptset-upload-form button[type=submit]")
    page.wait_for_selector("#intake-report")
    page.console_problems.clear()  # the rejected upload comes back with its form
    main = page.locator("main").inner_text()
    assert main.count("cannot tell the format") == 1, f"the upload error is shown {main.count('cannot tell the format')} times"
    assert page.locator(".column-mapping[open]").count() == 1
    for field in page.locator(".mapping-field").all():
        label, box = field.locator("label").bounding_box(), field.locator("input").bounding_box()
        assert label["x"] + label["width"] <= box["x"] + 1 and abs(label["y"] - box["y"]) < 12, \
            "the column mapping runs labels and inputs together"
    screenshot(page, "upload-error")


def test_a_problem_page_draws_its_statement_as_the_lean_lexer_reads_it_and_its_numbers_as_the_api_gives_them(
        page, alice, alices_client, promptset_version):
    problem = promptset_version.promptset.problems.first()
    problem.formal_statement = ('theorem t (x : ℕ) (h : «odd -- name» = "<b>not bold</b>") :\n'
                                "  /- a /- nested -/ comment -/ x = x := by -- the end")
    problem.source_win_rate = 0.375
    problem.save()
    log_in(page, "alice", "alice-password")
    page.goto(f"/promptsets/{problem.promptset_id}/problems/{problem.pk}/")
    statement = page.locator("main pre.lean").last
    assert statement.inner_text() == problem.formal_statement  # escaped: the <b> is text, not markup
    assert statement.locator("b").count() == 0
    comments = statement.locator(".c1, .cm, .sd").all_inner_texts()
    assert comments == ["/- a /- nested -/ comment -/", "-- the end"], comments
    assert statement.locator(".kn").first.inner_text() == "theorem"
    [listed] = [row for row in alices_client.get(
        f"/api/promptsets/{problem.promptset_id}/versions/1/problems").json() if row["id"] == problem.pk]
    facts = page.locator("dl.facts").inner_text()
    assert f"File win rate\n{listed['source_win_rate']}" in facts and f"Id\n{listed['problem_key']}" in facts, facts
    screenshot(page, "problem-page")
