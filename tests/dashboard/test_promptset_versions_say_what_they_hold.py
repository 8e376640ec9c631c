"""A split's parts are named, the training part is what to train on, a sample never pretends, and a
Parquet file is known by its first bytes whatever its name."""


import pytest

from promptsets import versions
from promptsets.curation import Sample, Split, describe_rule
from promptsets.models import PromptsetVersion
from promptsets.parsing import FileFormat, detect_format

pytestmark = pytest.mark.django_db


def test_a_split_names_its_parts_and_the_training_part_is_the_version_to_train_on(promptset_version):
    train, held_out = versions.curate(promptset_version, Split(eval_fraction=0.34))
    assert (str(train), str(held_out)) == ("arith v2 (train part)", "arith v3 (held-out eval part)")
    assert promptset_version.promptset.latest_version == held_out
    assert promptset_version.promptset.training_version == train


def test_a_parts_name_its_rule_and_the_sql_annotation_agree_on_what_is_held_out(promptset_version):
    train, held_out = versions.curate(promptset_version, Split(eval_fraction=0.34))
    assert describe_rule(train.rule).startswith("Split: the train part ")
    assert describe_rule(held_out.rule).startswith("Split: the held-out eval part ")
    annotated = {version.pk: version.held_out for version in PromptsetVersion.objects.with_held_out()}
    assert annotated == {version.pk: version.is_held_out for version in (promptset_version, train, held_out)}
    assert annotated[held_out.pk] and not annotated[train.pk]


def test_a_sample_larger_than_its_version_is_refused_with_the_number_there_is(promptset_version):
    with pytest.raises(versions.CurationRefused, match="has 3 problems.*at most 3"):
        versions.curate(promptset_version, Sample(count=1000))
    assert promptset_version.promptset.versions.count() == 1


def test_parquet_magic_bytes_win_over_a_jsonl_name():
    assert detect_format("rows.jsonl", b"PAR1") is FileFormat.PARQUET
    assert detect_format("rows.jsonl", b'{"a"') is FileFormat.JSONL


def test_a_filled_but_invalid_split_share_says_what_is_wrong_and_not_that_it_is_required(client, alice, promptset_version):
    client.force_login(alice)
    response = client.post(f"/promptsets/{promptset_version.promptset_id}/versions/1/curate/",
                           {"kind": "split", "eval_fraction": "20", "seed": "0"})
    page = response.content.decode()
    assert response.status_code == 400 and "less than or equal to 0.999" in page
    assert "required" not in page.split('id="id_eval_fraction"')[1].split("</ul>")[0]
