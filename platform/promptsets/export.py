"""A promptset version as a file: JSON Lines or Parquet, one row per problem, streamed.

The columns are the trainer's row format (``problem_id``, ``formal_statement``, ``informal_statement``,
``name``, ``header``, ``source``) plus ``win_rate`` (the uploaded file's) and ``copies`` (the
curation's weight), so an export uploads again as the same problems and the trainer reads it as it is.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

from django.http import FileResponse, StreamingHttpResponse

from promptsets.curation import describe_rule
from promptsets.models import PromptsetVersion
from trainer.run.hub import push_folder

EXPORT_FORMATS = ("jsonl", "parquet")
BATCH_ROWS = 5000
COLUMNS = ("problem_id", "name", "formal_statement", "informal_statement", "header", "source", "win_rate", "copies")


class UnknownExportFormat(ValueError):
    pass


def export_rows(version: PromptsetVersion) -> Iterator[dict]:
    for entry in version.entries.select_related("problem").order_by("position").iterator(chunk_size=BATCH_ROWS):
        problem = entry.problem
        yield {**problem.as_trainer_row(), "win_rate": problem.source_win_rate, "copies": entry.copies}


def promptset_schema():
    import pyarrow as pa

    return pa.schema([(name, pa.string()) for name in COLUMNS[:6]] + [("win_rate", pa.float64()), ("copies", pa.int32())])


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


def write_parquet(version: PromptsetVersion, destination) -> None:
    write_parquet_rows(export_rows(version), promptset_schema(), destination)


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


def export_response(version: PromptsetVersion, file_format: str):
    return rows_as_file(export_rows(version), promptset_schema, file_format,
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
`header` (the Lean preamble), `source`, `win_rate` (as uploaded), `copies` (the curation's weight).
"""


def push_version_to_hub(version: PromptsetVersion, repo_id: str, *, token: str | None, private: bool = True,
                        endpoint: str | None = None) -> str:
    """The version as a Hub dataset repository (Parquet in the Hub's layout and a dataset card); its commit URL."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "data").mkdir()
        with open(Path(folder) / "data" / "train-00000-of-00001.parquet", "wb") as destination:
            write_parquet(version, destination)
        (Path(folder) / "README.md").write_text(DATASET_CARD.format(
            name=version.promptset.name, number=version.number, problem_count=version.problem_count,
            rule=describe_rule(version.rule)))
        return push_folder(folder, repo_id, repo_type="dataset", private=private, token=token, endpoint=endpoint,
                           commit_message=f"{version.promptset.name} v{version.number} from the Lean RL platform")
