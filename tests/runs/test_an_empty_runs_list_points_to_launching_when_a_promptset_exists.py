"""With no run yet, the landing page (the runs list) says what to do next: upload a promptset where there is none,
launch a run where there are promptsets already."""

import re

import pytest

pytestmark = pytest.mark.django_db


def empty_row(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", re.search(r'<tr class="empty">(.*?)</tr>', html, re.S)[1]).split())


def test_with_promptsets_it_points_to_launching_a_run_on_them(alices_client, promptset_version):
    text = empty_row(alices_client.get("/runs/").content.decode())
    assert "Upload a promptset, then launch a run" not in text
    assert text == "No runs yet. Launch a run : you can use 1 promptset ( see them )."


def test_with_no_promptset_it_points_to_uploading_one(alices_client):
    assert empty_row(alices_client.get("/runs/").content.decode()) == (
        "No runs yet. Upload a promptset , then launch a run.")
