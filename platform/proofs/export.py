"""A step's rollouts as a file, to open in pandas or W&B: JSON Lines or Parquet, one row per rollout.

The first columns are verl's rollout dump's (``input``, ``output``, ``gts``, ``score``, ``step``: the prompt,
the answer, the formal statement, the reward, the step), so tools written for verl's dumps read ours; the rest
are what the proof viewer shows, and last each trained rollout's token records (advantage, and per token the
log-probabilities, entropy, loss weight and flags: trainer/observability/token_records.py), null where none were written, and
``token_records_state`` saying why: ``recorded``, ``pending`` (the step's file is still being written: export again
shortly) or ``not_recorded`` (never: an evaluation sample, an answer not trained, a step the retention removed).
``score`` is empty (null) for a censored rollout: a verifier that could not decide is not a 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from django.db.models import QuerySet

from promptsets.export import BATCH_ROWS, rows_as_file
from proofs.models import ProofAttempt
from trainer.observability import token_records

STRING_COLUMNS = ("input", "output", "gts", "rollout_key", "problem_id", "problem_name", "turn", "parent_rollout_key",
                  "verdict", "format_error", "reasoning", "lean_code", "lean_messages", "reasons", "tool_calls",
                  "token_records_state")


# The token records' figures (trainer/observability/token_records.py), one list a rollout, empty (null) where none were written.
TOKEN_COLUMNS = ("advantage", "token_ids", "token_texts", "engine_logprob", "learner_logprob", "entropy", "loss_weight",
                 "flags")


def rollout_rows(attempts: QuerySet[ProofAttempt], recorded: token_records.StepRecords) -> Iterator[dict]:
    # Rows the step's file lacks share their reason within a run attempt: looked up once each, not once a row.
    missing: dict[int, token_records.RecordsState] = {}
    for attempt in attempts.order_by("pk").iterator(chunk_size=BATCH_ROWS):
        tokens = recorded.get(attempt.rollout_key, {}) if not attempt.is_evaluation else {}
        if attempt.is_evaluation:
            state = token_records.RecordsState.NOT_RECORDED
        elif tokens:
            state = token_records.RecordsState.RECORDED
        else:
            if attempt.run_attempt not in missing:
                missing[attempt.run_attempt] = attempt.look_up_token_records().state
            state = missing[attempt.run_attempt]
        yield {
            "input": attempt.prompt, "output": attempt.response, "gts": attempt.formal_statement,
            "score": attempt.reward, "step": attempt.step,
            "rollout_key": attempt.rollout_key, "problem_id": attempt.problem_key, "problem_name": attempt.problem_name,
            "turn": attempt.turn, "round": attempt.round, "parent_rollout_key": attempt.parent_rollout_key,
            "sample_index": attempt.sample_index,
            "is_evaluation": attempt.is_evaluation, "verdict": attempt.verdict, "format_error": attempt.format_error,
            "is_censored": attempt.is_censored, "is_standin_verdict": attempt.is_standin_verdict,
            "num_tokens": attempt.num_tokens, "is_truncated": attempt.is_truncated,
            "policy_version": attempt.policy_version, "reasoning": attempt.reasoning, "lean_code": attempt.lean_code,
            # Nested lists as JSON text: one flat column each, the same in both formats.
            "lean_messages": json.dumps(attempt.lean_messages, ensure_ascii=False),
            "reasons": json.dumps(attempt.reasons, ensure_ascii=False),
            "tool_calls": json.dumps(attempt.tool_calls, ensure_ascii=False),
            "token_records_state": state.value,
            **{name: tokens.get(name) for name in TOKEN_COLUMNS},
        }


def rollout_schema():
    import pyarrow as pa

    fields = {name: pa.string() for name in STRING_COLUMNS}
    fields.update(score=pa.float64(), step=pa.int64(), round=pa.int64(), sample_index=pa.int64(), is_evaluation=pa.bool_(),
                  is_censored=pa.bool_(), is_standin_verdict=pa.bool_(), num_tokens=pa.int64(),
                  is_truncated=pa.bool_(), policy_version=pa.int64())
    order = ("input", "output", "gts", "score", "step", "rollout_key", "problem_id", "problem_name", "turn", "round",
             "parent_rollout_key", "sample_index", "is_evaluation", "verdict", "format_error", "is_censored",
             "is_standin_verdict", "num_tokens", "is_truncated", "policy_version", "reasoning", "lean_code",
             "lean_messages", "reasons", "tool_calls", "token_records_state")
    records = {field.name: field.type for field in token_records.schema()}
    return pa.schema([(name, fields[name]) for name in order] + [(name, records[name]) for name in TOKEN_COLUMNS])


def export_response(run, step: int, attempts: QuerySet[ProofAttempt], file_format: str):
    """The step's rows with their token records, read once from the step's files (every attempt's)."""
    recorded = token_records.step_records(run.artifacts_dir, step, TOKEN_COLUMNS)
    return rows_as_file(rollout_rows(attempts, recorded), rollout_schema, file_format,
                        f"{run.name}-step-{step}.{file_format}")
