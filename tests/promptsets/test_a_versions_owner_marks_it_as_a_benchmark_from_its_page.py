"""A version's page has a "Mark as a benchmark" button for the promptset's owner: it does what
``POST /api/benchmarks/`` does (promptsets.benchmarks.mark_as_benchmark), under the same owner-only rule."""

import pytest

from promptsets.models import Benchmark

pytestmark = pytest.mark.django_db


def mark_url(version):
    return f"/promptsets/{version.promptset_id}/versions/{version.number}/benchmark/"


def test_the_owner_sees_the_button_and_marking_makes_the_benchmark(alices_client, promptset_version):
    page = alices_client.get(promptset_version.get_absolute_url()).content.decode()
    assert f'action="{mark_url(promptset_version)}"' in page and "Mark as a benchmark" in page
    response = alices_client.post(mark_url(promptset_version), {"name": "my arithmetic"}, follow=True)
    benchmark = Benchmark.objects.get(version=promptset_version)
    assert benchmark.name == "my arithmetic" and not benchmark.is_shipped
    page = response.content.decode()
    assert f'href="/benchmarks/{benchmark.pk}/"' in page and "Mark as a benchmark" not in page


def test_a_blank_name_names_it_after_the_version_and_marking_twice_keeps_the_first(alices_client, promptset_version):
    alices_client.post(mark_url(promptset_version), {"name": ""})
    alices_client.post(mark_url(promptset_version), {"name": "later"})
    assert list(Benchmark.objects.values_list("name", flat=True)) == [str(promptset_version)]


def test_someone_who_may_see_but_not_edit_the_promptset_is_refused_and_has_no_button(client, bob, promptset_version):
    promptset_version.promptset.is_public = True
    promptset_version.promptset.save()
    client.force_login(bob)
    assert "Mark as a benchmark" not in client.get(promptset_version.get_absolute_url()).content.decode()
    assert client.post(mark_url(promptset_version), {"name": "bob's"}).status_code == 403
    assert not Benchmark.objects.exists()


def test_a_stranger_cannot_tell_a_private_promptset_exists(client, charlie, promptset_version):
    client.force_login(charlie)
    assert client.post(mark_url(promptset_version)).status_code == 404
