"""validate_promptset prints the per-row report and fails on any rejected row; the demo is created once."""

import pytest
from django.core.management import CommandError, call_command

from promptsets.demo import DEMO_PROBLEMS, DEMO_PROMPTSET_NAME, SMOKE_PROMPTSET_NAME
from promptsets.models import Promptset
from tests.promptsets.conftest import encode, kimina_rows
from trainer.recipe.problems import DEFAULT_LEAN_HEADER


def write(tmp_path, rows, name="rows.jsonl"):
    path = tmp_path / name
    path.write_bytes(encode(rows, name.rsplit(".", 1)[1]))
    return str(path)


def test_validate_promptset_exits_zero_on_a_clean_file(tmp_path, capsys):
    call_command("validate_promptset", write(tmp_path, kimina_rows(3), "k.csv"))
    assert "3 rows read, 3 valid, 0 rejected (format csv)" in capsys.readouterr().out


def test_validate_promptset_lists_each_rejected_row_and_exits_non_zero(tmp_path, capsys):
    rows = kimina_rows(3)
    rows[1]["formal_statement"] = "theorem t : True := by\n  trivial"
    with pytest.raises(SystemExit) as exited:
        call_command("validate_promptset", write(tmp_path, rows))
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert "row 2 [kimina-1]: a proof follows ':= by'" in out and "1 rejected" in out


def test_validate_promptset_takes_a_column_mapping(tmp_path, capsys):
    path = write(tmp_path, [{"lean": "theorem t : True := by"}])
    with pytest.raises(SystemExit):
        call_command("validate_promptset", path)
    call_command("validate_promptset", path, "--column", "formal_statement=lean")
    with pytest.raises(CommandError, match="FIELD=COLUMN"):
        call_command("validate_promptset", path, "--column", "statement=lean")


def test_validate_promptset_stores_nothing(tmp_path, minif2f_deepseek_path, capsys):
    call_command("validate_promptset", str(minif2f_deepseek_path))
    assert "488 rows read, 488 valid" in capsys.readouterr().out


@pytest.mark.django_db
def test_create_demo_promptset_is_idempotent_and_public(alice, capsys):
    call_command("create_demo_promptset", "--owner", "alice")
    call_command("create_demo_promptset", "--owner", "alice")
    promptset = Promptset.objects.get(owner=alice, name=DEMO_PROMPTSET_NAME)
    assert promptset.is_public and promptset.versions.count() == 1
    rows = list(promptset.latest_version.trainer_rows())
    assert [row["problem_id"] for row in rows] == [p.key for p in DEMO_PROBLEMS]
    assert rows[0]["header"].strip() == DEFAULT_LEAN_HEADER.strip()  # the trainer's header, its one home
    assert "Already present" in capsys.readouterr().out


@pytest.mark.django_db
def test_the_same_command_creates_the_smoke_promptset_the_cpu_smoke_model_knows(alice):
    from trainer.recipe.problems import Problem as TrainerProblem
    from trainer.recipe.prompts import first_attempt_messages
    from trainer.sft.smoke_model import SMOKE_PROBLEMS

    call_command("create_demo_promptset", "--owner", "alice")
    promptset = Promptset.objects.get(owner=alice, name=SMOKE_PROMPTSET_NAME)
    assert promptset.is_public
    rows = list(promptset.latest_version.trainer_rows())
    assert [(row["problem_id"], row["formal_statement"]) for row in rows] == [
        (problem.problem_id, problem.formal_statement) for problem in SMOKE_PROBLEMS]
    # The model knows its answers by heart, to the prompt's last character: a platform run must prompt as it learned.
    exported = [TrainerProblem.from_dict(row) for row in rows]
    assert [first_attempt_messages(problem) for problem in exported] == [
        first_attempt_messages(problem) for problem in SMOKE_PROBLEMS]


@pytest.mark.django_db
def test_import_promptset_uses_the_same_validation(tmp_path, alice):
    rows = kimina_rows(2) + [{"statement_id": "bad", "formal_statement": "theorem t := by"}]
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_promptset", write(tmp_path, rows), "--owner", "alice", "--name", "cli")
    call_command("import_promptset", write(tmp_path, rows), "--owner", "alice", "--name", "cli", "--skip-invalid-rows")
    assert Promptset.objects.get(name="cli").latest_version.problem_count == 2


@pytest.mark.django_db
def test_import_promptset_shows_the_bytes_and_rows_it_has_read_on_a_terminal(tmp_path, alice, terminal_stderr):
    path = write(tmp_path, kimina_rows(40))
    stderr = terminal_stderr()
    call_command("import_promptset", path, "--owner", "alice", "--name", "cli")
    drawn = stderr.getvalue()
    assert "rows.jsonl: 100%" in drawn and "13.2k/13.2k" in drawn and "40 rows" in drawn  # the file is 13.2 KiB
    assert Promptset.objects.get(name="cli").latest_version.problem_count == 40


@pytest.mark.django_db
def test_import_promptset_draws_no_bar_where_standard_error_is_a_file(tmp_path, alice, capsys):
    call_command("import_promptset", write(tmp_path, kimina_rows(3)), "--owner", "alice", "--name", "cli")
    assert capsys.readouterr().err == ""


def test_validate_promptset_shows_its_reading_on_a_terminal_too(tmp_path, terminal_stderr, capsys):
    stderr = terminal_stderr()
    call_command("validate_promptset", write(tmp_path, kimina_rows(5), "k.csv"))
    assert "5 rows" in stderr.getvalue() and "100%" in stderr.getvalue()
