"""Browsing: who sees which promptset, search and pagination, the problem page and its history."""

import io

import pytest
from django.urls import reverse

from promptsets import versions
from promptsets.intake import FileCheck
from promptsets.models import Problem
from proofs.models import Turn
from tests.stored_attempts import stored_attempt
from tests.promptsets.conftest import encode, kimina_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def alices_promptset(alice):
    return versions.import_promptset(alice, "alice's set", FileCheck(io.BytesIO(encode(kimina_rows(60), "jsonl")),
                                                                    filename="k.jsonl")).promptset


@pytest.fixture
def public_promptset(bob):
    return versions.import_promptset(bob, "bob's public set", FileCheck(io.BytesIO(encode(kimina_rows(3), "jsonl")),
                                                                       filename="k.jsonl"), is_public=True).promptset


def page_of(client, user, name, *args, **query):
    client.force_login(user)
    return client.get(reverse(f"promptsets:{name}", args=args), query)


def test_a_person_sees_their_own_and_public_promptsets_only(client, alice, charlie, alices_promptset, public_promptset):
    listed = page_of(client, charlie, "list").content.decode()
    assert "bob&#x27;s public set" in listed and "alice&#x27;s set" not in listed
    listed = page_of(client, alice, "list").content.decode()
    assert "bob&#x27;s public set" in listed and "alice&#x27;s set" in listed


def test_a_stranger_gets_not_found_for_a_private_promptset_and_its_problems(client, charlie, alices_promptset):
    problem = alices_promptset.problems.first()
    assert page_of(client, charlie, "detail", alices_promptset.pk).status_code == 404
    assert page_of(client, charlie, "version", alices_promptset.pk, 1).status_code == 404
    assert page_of(client, charlie, "problem", alices_promptset.pk, problem.pk).status_code == 404


def test_the_problem_table_is_paginated_and_searchable(client, alice, alices_promptset):
    first_page = page_of(client, alice, "version", alices_promptset.pk, 1).content.decode()
    assert "Page 1 of 2" in first_page and "kimina-49" in first_page and "kimina-50" not in first_page
    assert "kimina-50" in page_of(client, alice, "version", alices_promptset.pk, 1, page=2).content.decode()
    found = page_of(client, alice, "detail", alices_promptset.pk, q="n = 42").content.decode()
    assert "kimina-42" in found and "kimina-41" not in found


def test_the_problem_page_highlights_the_statement_and_escapes_it(client, alice):
    rows = [{"name": "xss", "formal_statement": 'theorem xss : "<script>alert(1)</script>" = "" := by'}]
    promptset = versions.import_promptset(alice, "xss", FileCheck(io.BytesIO(encode(rows, "jsonl")), filename="x.jsonl")).promptset
    page = page_of(client, alice, "problem", promptset.pk, promptset.problems.get().pk).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;" in page and 'class="k' in page  # Pygments marked the keywords


def test_the_problem_page_shows_each_runs_attempts_and_the_platform_win_rate(client, alice, make_run):
    run = make_run(state="running", name="first try")
    problem = Problem.objects.get(problem_key="add_small")
    for index, reward in enumerate([1.0, 0.0, None, 0.0]):  # None: censored, not a wrong proof
        stored_attempt(run=run, rollout_key=f"r{index}", step=3 + index, problem=problem,
                       problem_key="add_small", turn=Turn.FIRST, reward=reward, is_censored=reward is None)
    stored_attempt(run=run, rollout_key="retry", step=9, problem=problem, problem_key="add_small",
                   turn=Turn.RETRY, reward=1.0)
    page = page_of(client, alice, "problem", problem.promptset_id, problem.pk).content.decode()
    assert "first try" in page
    assert "0.333 (1 of 3 scored first attempts in the runs you can see, counting real Lean&#x27;s verdicts)" in page
    (row,) = problem.attempt_history(alice)
    assert (row["first_answers"], row["first_scored"], row["first_accepted"], row["first_censored"],
            row["retry_answers"], row["retry_accepted"], row["first_solved_step"], row["last_solved_step"]) == (
        4, 3, 1, 1, 1, 1, 3, 9)
