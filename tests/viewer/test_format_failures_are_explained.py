"""A rollout page shows the raw answer always, escaped, with the format check's failing lines
marked, its words and the release's category."""

import pytest

pytestmark = pytest.mark.django_db

ANSWER = "<think>\nfirst <b>bold</b>\nsecond\n</think>\n```lean4\ncode```"


def test_the_page_marks_the_failing_lines_and_names_the_releases_category(make_run, make_attempt, alice, logged_in):
    attempt = make_attempt(make_run(state="running"), verdict="", reward=0.0, response=ANSWER, reasoning="", lean_code="",
                           lean_messages=[], format_error="invalid_lean4_code_block_count",
                           format_detail="its closing line '```' is not at a line start", format_failure_lines=[[5, 6]])
    html = logged_in(alice).get(f"/proofs/{attempt.pk}/").content.decode()
    assert '<code id="format-category">INVALID_LEAN4_CODE_BLOCK_COUNT</code>' in html
    assert "its closing line &#x27;```&#x27; is not at a line start" in html
    assert 'class="answer-line format-failure-line" data-line="5"' in html
    assert 'class="answer-line format-failure-line" data-line="6"' in html
    assert 'class="answer-line" data-line="4"' in html
    assert "first &lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html
    assert '<details class="raw-answer-block" id="raw-answer-block" open>' in html


def test_a_scored_answer_shows_its_raw_text_too_folded_away(make_run, make_attempt, alice, logged_in):
    attempt = make_attempt(make_run(state="running"), response="<think>ok</think>\n```lean4\nx\n```")
    html = logged_in(alice).get(f"/proofs/{attempt.pk}/").content.decode()
    assert '<details class="raw-answer-block" id="raw-answer-block">' in html
    assert "format-failure-line" not in html and 'id="format-failure"' not in html


def test_malformed_stored_line_ranges_mark_nothing_rather_than_fail(make_run, make_attempt):
    attempt = make_attempt(make_run(state="running"), response="a\nb", format_failure_lines=[["x", 2], [1], 5])
    assert [line["is_marked"] for line in attempt.response_lines()] == [False, False]


def test_the_api_gives_the_raw_answer_the_checks_words_and_its_lines(make_run, make_attempt, alice, logged_in):
    attempt = make_attempt(make_run(state="running"), response=ANSWER, format_error="invalid_lean4_code_block_count",
                           format_detail="no block", format_failure_lines=[[5, 6]])
    body = logged_in(alice).get(f"/api/proofs/attempts/{attempt.pk}").json()
    assert body["response"] == ANSWER
    assert body["format_detail"] == "no block" and body["format_failure_lines"] == [[5, 6]]
