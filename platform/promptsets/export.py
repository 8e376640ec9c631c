"""A promptset version as a file: JSON Lines or Parquet, one row per problem, streamed.

The columns are the trainer's row format (``problem_id``, ``formal_statement``, ``informal_statement``,
``name``, ``header``, ``source``) plus ``win_rate`` (the uploaded file's) and ``copies`` (the
curation's weight), so an export uploads again as the same problems and the trainer reads it as it is.

Three more columns carry each problem's history on this platform (proofs/history.py), so that a run can start
its prompt selection (``data.selection=history``) from what earlier runs learned; each is null where the
statement has no history the exporting person may see:

- ``prior_attempts``: first-attempt answers to the statement that were scored (censored ones left out) in the
  earlier runs the person may see: the launching run's owner for a run's own file, the downloader for a download.
- ``prior_solves``: of those, the ones accepted.
- ``prior_signal_less_streak``: how many of the statement's most recent first-attempt groups (one group: one
  run's answers at one step) gave no signal (all accepted or all rejected), counted back from the newest until
  one with signal.

Whose verdicts they count: real Lean's only, wherever any problem of the version has a scored Lean verdict; only
where none has (runs judged by the stand-in Lean server), the stand-in's. Never both mixed.
An upload ignores these columns (promptsets/intake.py reads only the columns it maps).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

from django.http import FileResponse, StreamingHttpResponse

from promptsets import results
from promptsets.curation import describe_rule
from promptsets.models import PromptsetVersion
from trainer.run.hub import push_folder

EXPORT_FORMATS = ("jsonl", "parquet")
BATCH_ROWS = 5000
PRIOR_HISTORY_COLUMNS = ("prior_attempts", "prior_solves", "prior_signal_less_streak")
COLUMNS = ("problem_id", "name", "formal_statement", "informal_statement", "header", "source", "win_rate",
           "copies") + PRIOR_HISTORY_COLUMNS
NO_PRIOR_HISTORY = dict.fromkeys(PRIOR_HISTORY_COLUMNS)


class UnknownExportFormat(ValueError):
    pass


def prior_history_columns(version: PromptsetVersion, viewer, *, excluding_run_id: int | None = None) -> dict[str, dict]:
    """Statement hash → the three prior-history columns of its rows, as ``viewer`` may see the history (module
    docstring); statements without history are left out (their columns are null)."""
    hashes = set(version.entries.values_list("problem__statement_hash", flat=True))
    verified_by = results.verifier_of(hashes, viewer)
    return {identity: {"prior_attempts": prior.attempts, "prior_solves": prior.solves,
                       "prior_signal_less_streak": prior.signal_less_streak}
            for identity, prior in results.prior_histories(hashes, viewer, verified_by, excluding_run_id).items()}


def export_rows(version: PromptsetVersion, viewer) -> Iterator[dict]:
    prior = prior_history_columns(version, viewer)
    for entry in version.entries.select_related("problem").order_by("position").iterator(chunk_size=BATCH_ROWS):
        problem = entry.problem
        yield {**problem.as_trainer_row(), "win_rate": problem.source_win_rate, "copies": entry.copies,
               **prior.get(problem.statement_hash, NO_PRIOR_HISTORY)}


def run_input_rows(version: PromptsetVersion, owner, run_id: int) -> Iterator[dict]:
    """What a run's trainer reads (runs.actions.export_run_inputs): each problem repeated by its weight, in the
    trainer's row format, with its prior history in the runs the run's owner may see, the run itself left out."""
    prior = prior_history_columns(version, owner, excluding_run_id=run_id)
    for entry in version.entries.select_related("problem").order_by("position").iterator(chunk_size=BATCH_ROWS):
        row = {**entry.problem.as_trainer_row(), **prior.get(entry.problem.statement_hash, NO_PRIOR_HISTORY)}
        for _ in range(entry.copies):
            yield row


def promptset_schema():
    import pyarrow as pa

    return pa.schema([(name, pa.string()) for name in COLUMNS[:6]] + [("win_rate", pa.float64()), ("copies", pa.int32())]
                     + [(name, pa.int64()) for name in PRIOR_HISTORY_COLUMNS])


def jsonl_stream(rows: Iterator[dict]) -> Iterator[bytes]:
    batch = []
    for row in rows:
        batch.append(json.dumps(row, ensure_ascii=False))
        if len(batch) >= BATCH_ROWS:
            yield ("\n".join(batch) + "\n").encode()
            batch = []
    if batch:
        yield ("\n".join(batch) + "\n").encode()


def write_parquet_rows(rows: Iterator[dict], schema, destination) -> None:
    """Row groups of BATCH_ROWS, written as they are read: memory stays one batch whatever the size."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetWriter(destination, schema, compression="zstd") as writer:
        batch = []
        for row in rows:
            batch.append(row)
            if len(batch) >= BATCH_ROWS:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))


def write_parquet(version: PromptsetVersion, destination, viewer) -> None:
    write_parquet_rows(export_rows(version, viewer), promptset_schema(), destination)


def rows_as_file(rows: Iterator[dict], schema, file_format: str, filename: str):
    """A download of ``rows``: JSON Lines streamed as they are read, or Parquet (``schema``, a pyarrow schema or a
    callable making one) written whole first, to disk, not memory: its footer comes last."""
    if file_format not in EXPORT_FORMATS:
        raise UnknownExportFormat(f"unknown export format {file_format!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    filename = filename.replace('"', "").replace("/", "-")
    if file_format == "jsonl":
        response = StreamingHttpResponse(jsonl_stream(rows), content_type="application/jsonl; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
    spool = tempfile.TemporaryFile()
    write_parquet_rows(rows, schema() if callable(schema) else schema, spool)
    spool.seek(0)
    return FileResponse(spool, as_attachment=True, filename=filename, content_type="application/vnd.apache.parquet")


def export_response(version: PromptsetVersion, file_format: str, viewer):
    return rows_as_file(export_rows(version, viewer), promptset_schema, file_format,
                        f"{version.promptset.name}-v{version.number}.{file_format}")


DATASET_CARD = """---
tags:
- lean4
- theorem-proving
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*.parquet
---

# {name} (version {number})

{problem_count} Lean 4 formal statements, exported from the Lean RL platform: {rule}.
Columns: `problem_id`, `name`, `formal_statement` (ending in `:= by`, no proof), `informal_statement`,
`header` (the Lean preamble), `source`, `win_rate` (as uploaded), `copies` (the curation's weight),
`prior_attempts`, `prior_solves`, `prior_signal_less_streak` (the statement's history on the platform, as its
owner sees it: scored first attempts, accepted ones, and the newest groups in a row without signal; null: none).
"""


def push_version_to_hub(version: PromptsetVersion, repo_id: str, *, token: str | None, private: bool = True,
                        endpoint: str | None = None) -> str:
    """The version as a Hub dataset repository (Parquet in the Hub's layout and a dataset card); its commit URL."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "data").mkdir()
        with open(Path(folder) / "data" / "train-00000-of-00001.parquet", "wb") as destination:
            write_parquet(version, destination, version.promptset.owner)
        (Path(folder) / "README.md").write_text(DATASET_CARD.format(
            name=version.promptset.name, number=version.number, problem_count=version.problem_count,
            rule=describe_rule(version.rule)))
        return push_folder(folder, repo_id, repo_type="dataset", private=private, token=token, endpoint=endpoint,
                           commit_message=f"{version.promptset.name} v{version.number} from the Lean RL platform")
