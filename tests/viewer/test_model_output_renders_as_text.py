"""Model output is untrusted: markup in reasoning, code, Lean's messages or names arrives as text."""

import json
import re

import pytest

pytestmark = pytest.mark.django_db

PAYLOADS = ['<script>alert("x")</script>', '<img src=x onerror=alert(1)>', '</script><script>alert(2)</script>']


@pytest.fixture
def hostile_attempt(make_run, make_attempt):
    run = make_run(state="running")
    text = "\n".join(PAYLOADS)
    return make_attempt(
        run, reasoning=text, lean_code=f"theorem t : True := by\n  {PAYLOADS[1]}", checked_code=f"theorem t : True := by\n  {PAYLOADS[0]}",
        problem_name=PAYLOADS[1], formal_statement=PAYLOADS[0], prompt=PAYLOADS[2],
        lean_messages=[{"severity": "error", "line": 2, "column": 2, "end_line": 2, "end_column": 9, "text": text}],
        reasons=[PAYLOADS[1]], reward=0.0,
    )


def assert_no_live_markup(html):
    for payload in PAYLOADS:
        assert payload not in html
    assert not re.search(r"<img[^>]*onerror", html)
    # The only script elements are ours: the bundles and the JSON data blocks.
    for opening in re.findall(r"<script[^>]*>", html):
        assert 'type="module"' in opening or 'type="application/json"' in opening, opening


def test_the_rollout_page_escapes_every_field(hostile_attempt, alice, logged_in):
    html = logged_in(alice).get(f"/proofs/{hostile_attempt.pk}/").content.decode()
    assert_no_live_markup(html)
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_the_run_page_escapes_the_rollout_cards(hostile_attempt, alice, logged_in):
    html = logged_in(alice).get(f"/runs/{hostile_attempt.run_id}/").content.decode()
    assert_no_live_markup(html)
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_json_handed_to_the_page_cannot_close_its_script_element(hostile_attempt, alice, logged_in):
    html = logged_in(alice).get(f"/proofs/{hostile_attempt.pk}/").content.decode()
    block = re.search(r'<script id="code-views" type="application/json">(.*?)</script>', html, re.S).group(1)
    assert "<" not in block
    assert json.loads(block)["attempt"]["messages"][0]["text"] == "\n".join(PAYLOADS)


def test_a_log_line_with_markup_is_handed_over_as_data(make_run, alice, logged_in):
    from django.utils import timezone

    run = make_run(state="running")
    run.events.create(event_id="log-1", seq=0, run_seq=1, type="log", payload={"level": "info", "message": PAYLOADS[2]},
                      published_at=timezone.now())
    html = logged_in(alice).get(f"/runs/{run.pk}/").content.decode()
    assert_no_live_markup(html)
    assert "\\u003C/script\\u003E" in html
