"""Curation makes a new immutable version with its parent and rule; only the owner curates."""

import io

import pytest
from django.urls import reverse

from promptsets import results, versions
from promptsets.curation import DropAboveWinRate, Sample, Split, WeightHardProblems, WinRateSource
from promptsets.intake import FileCheck
from promptsets.models import Problem, PromptsetVersion
from proofs.models import Turn
from tests.stored_attempts import stored_attempt
from tests.promptsets.conftest import encode, kimina_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def version_1(alice):
    return versions.import_promptset(alice, "kimina", FileCheck(io.BytesIO(encode(kimina_rows(5), "jsonl")),
                                                                 filename="k.jsonl"), is_public=True).version


def keys(version):
    return [row["problem_id"] for row in version.trainer_rows()]


def test_dropping_by_the_files_win_rate_makes_version_2_and_leaves_version_1_alone(version_1):
    (version_2,) = versions.curate(version_1, DropAboveWinRate(max_win_rate=0.5))
    assert (version_2.number, version_2.parent, version_2.rule["kind"]) == (2, version_1, "drop_above_win_rate")
    assert keys(version_2) == ["kimina-0", "kimina-1", "kimina-2"]
    version_1.refresh_from_db()
    assert version_1.problem_count == 5 and len(keys(version_1)) == 5


def test_weighting_hard_problems_repeats_them_in_the_trainer_rows(version_1):
    (weighted,) = versions.curate(version_1, WeightHardProblems(max_win_rate=0.25, copies=3))
    assert keys(weighted) == ["kimina-0"] * 3 + ["kimina-1"] * 3 + ["kimina-2", "kimina-3", "kimina-4"]


def test_a_split_makes_two_versions_with_the_same_parent(version_1):
    train, held_out = versions.curate(version_1, Split(eval_fraction=0.4, seed=3))
    assert (train.rule["part"], held_out.rule["part"]) == ("train", "eval")
    assert train.parent == held_out.parent == version_1
    assert sorted(keys(train) + keys(held_out)) == sorted(keys(version_1))


def test_the_platform_win_rate_excludes_censored_attempts_and_retries(alice, make_run, promptset_version):
    run = make_run(state="running")
    solved = Problem.objects.get(problem_key="add_small")
    for index, reward in enumerate([1.0, 1.0, None, None, None]):
        stored_attempt(run=run, rollout_key=f"s{index}", step=1, problem=solved, problem_key="add_small",
                   turn=Turn.FIRST, reward=reward, is_censored=reward is None)
    failing = Problem.objects.get(problem_key="mul_small")
    stored_attempt(run=run, rollout_key="f0", step=1, problem=failing, problem_key="mul_small",
                   turn=Turn.FIRST, reward=0.0)
    stored_attempt(run=run, rollout_key="f1", step=1, problem=failing, problem_key="mul_small",
                   turn=Turn.RETRY, reward=1.0)
    # Not linked to a Problem row by the ingester: found by the statement the trainer sent.
    stored_attempt(run=run, rollout_key="u0", step=1, problem=None, problem_key="lt_small",
                   formal_statement="theorem lt_small : (3 : ℚ) / 4 <  1 := by", turn=Turn.FIRST, reward=0.0)
    (curated,) = versions.curate(promptset_version, DropAboveWinRate(max_win_rate=0.5,
                                                                   win_rate_source=WinRateSource.PLATFORM))
    assert keys(curated) == ["mul_small", "lt_small"]
    unlinked = Problem.objects.get(problem_key="lt_small")
    assert results.win_rates([solved.pk, failing.pk, unlinked.pk], viewer=alice) == {
        solved.pk: (2, 2), failing.pk: (0, 1), unlinked.pk: (0, 1)}


def test_a_rule_that_keeps_nothing_is_refused(version_1):
    with pytest.raises(versions.CurationRefused, match="keeps none"):
        versions.curate(version_1, DropAboveWinRate(max_win_rate=0.5, win_rate_source=WinRateSource.PLATFORM,
                                                   keep_unknown=False))
    assert PromptsetVersion.objects.count() == 1


def test_the_owner_curates_through_the_form_and_lands_on_the_new_version(client, alice, version_1):
    client.force_login(alice)
    response = client.post(reverse("promptsets:curate", args=[version_1.promptset_id, 1]),
                           {"kind": "sample", "count": 2, "seed": 5})
    new = PromptsetVersion.objects.get(number=2)
    assert response.status_code == 302 and response.url == new.get_absolute_url()
    assert new.rule == Sample(count=2, seed=5).model_dump(mode="json") and new.problem_count == 2


def test_the_form_names_the_missing_field_of_the_chosen_rule(client, alice, version_1):
    client.force_login(alice)
    response = client.post(reverse("promptsets:curate", args=[version_1.promptset_id, 1]), {"kind": "weight_hard"})
    assert response.status_code == 400
    assert "required for “Repeat hard problems”" in response.content.decode()


def test_someone_else_may_see_a_public_promptset_but_not_curate_it(client, bob, version_1):
    client.force_login(bob)
    assert client.get(reverse("promptsets:version", args=[version_1.promptset_id, 1])).status_code == 200
    response = client.post(reverse("promptsets:curate", args=[version_1.promptset_id, 1]), {"kind": "sample", "count": 2})
    assert response.status_code == 403
    assert PromptsetVersion.objects.count() == 1


def test_variants_enter_a_new_version_only_when_valid_and_new(version_1):
    problem = Problem.objects.get(problem_key="kimina-0")
    version_2, refused = versions.add_variants(version_1, problem, [
        "theorem sum_0_variant (n : ℕ) (h : n = 7) : n + 1 = 8 := by",
        "theorem bad : 1 = 1 := by rfl",
        problem.formal_statement,
    ], endpoint_model="tiny")
    assert version_2.parent == version_1 and version_2.rule["kind"] == "variants"
    assert keys(version_2)[-1].startswith("kimina-0~variant-") and len(keys(version_2)) == 6
    assert [reason.split(":")[0] for reason in refused] == ["variant 2", "variant 3"]
    assert Problem.objects.get(problem_key=keys(version_2)[-1]).header == problem.header
