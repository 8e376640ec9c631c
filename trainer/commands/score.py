"""``python -m trainer score``: rewards for JSON-lines answers, from a Lean server.

Each input line is ``{"problem_id": …, "response": …}`` (problems from ``--problems``) or
``{"problem": {…a promptset row…}, "response": …}``, optionally with ``num_tokens``. Each
output line, in input order: reward (null when censored), verdict, reasons, whether the
stand-in decided it, Lean's messages and the checked code. Verifier counters go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from trainer.command_line import EXIT_MALFORMED_INPUT, EXIT_NOTHING_DECIDED, CommandError, config_error, existing_file
from trainer.commands.run import read_problems
from trainer.config import PRESETS, RunConfig
from trainer.observability.progress import progress_bar
from trainer.recipe.problems import Problem
from trainer.recipe.reward import RewardScorer
from trainer.verification.client import LeanVerifier


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problems", help="Promptset export (JSON lines with problem_id, formal_statement, …).")
    parser.add_argument("--preset", default="h100x8", help="Run preset whose reward and verifier settings apply.")
    parser.add_argument("--url", help="Lean server base URL (default: the preset's verifier.url).")
    parser.add_argument("--api-key", help="Bearer key for the Lean server, if it needs one.")
    parser.add_argument("--timeout-s", type=float, help="Per-proof Lean timeout (default: the preset's).")
    parser.add_argument("--max-in-flight", type=int, help="Proofs in flight at once (default: the preset's).")
    parser.add_argument(
        "--environment", default="default",
        help="Name of the server's Lean/Mathlib environment, part of the verdict cache key.",
    )
    parser.add_argument("--input", default="-", help="Input file (default: standard input).")


def main(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    if args.preset not in PRESETS:
        raise CommandError(f"--preset {args.preset}: no such preset; choose one of {', '.join(sorted(PRESETS))}")
    overrides: dict = {"verifier": {}}
    for option, field in (("url", "url"), ("api_key", "api_key"), ("timeout_s", "timeout_s"), ("max_in_flight", "max_in_flight")):
        if getattr(args, option) is not None:
            overrides["verifier"][field] = getattr(args, option)
    try:
        config = RunConfig.from_preset(args.preset, overrides)
    except ValidationError as error:
        raise config_error(error) from None
    problems = {problem.problem_id: problem for problem in read_problems(args.problems, "--problems")} if args.problems else {}

    stream = sys.stdin if args.input == "-" else existing_file(args.input, "--input").open(encoding="utf-8")
    where = "standard input" if args.input == "-" else f"--input {args.input}"
    rows = []
    for line_number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError(f"expected a JSON object, got {type(row).__name__}")
            if "problem" in row:
                problem = Problem.from_dict(row["problem"])
            elif row.get("problem_id") in problems:
                problem = problems[row["problem_id"]]
            else:
                raise ValueError(
                    f"problem_id {row.get('problem_id')!r} is not in --problems; give --problems or an inline 'problem'"
                )
            if not isinstance(row.get("response"), str):
                raise ValueError("'response' must be a string")
        except json.JSONDecodeError as error:
            raise CommandError(f"{where}, line {line_number}: not JSON ({error.msg} at column {error.colno})",
                               EXIT_MALFORMED_INPUT) from None
        except (ValueError, TypeError, KeyError) as error:
            raise CommandError(f"{where}, line {line_number}: {error}", EXIT_MALFORMED_INPUT) from None
        rows.append((problem, row))
    return asyncio.run(_score_all(config, rows, args.environment))


async def _score_all(config, rows, environment: str) -> int:
    verifier = LeanVerifier(config.verifier, environment=environment, allow_native_decide=config.reward.allow_native_decide)
    scorer = RewardScorer(config, verifier)

    bar = progress_bar(total=len(rows), desc="score", unit="answer")

    async def score_one(index, problem, row):
        result = await scorer.score(problem, row["response"], row.get("num_tokens"), key=f"{problem.problem_id}-{index}")
        bar.update(1)
        return result

    try:
        scored = await asyncio.gather(*(score_one(index, problem, row) for index, (problem, row) in enumerate(rows)))
    finally:
        bar.close()
        await verifier.aclose()
    for (problem, _), result in zip(rows, scored):
        verification = result.verification
        print(
            json.dumps(
                {
                    "problem_id": problem.problem_id,
                    "reward": result.reward,
                    "verdict": verification.verdict.value if verification else None,
                    "format_error": result.format_check.error.value if result.format_check.error else None,
                    "reasons": result.reasons,
                    "is_censored": result.is_censored,
                    "is_standin_verdict": result.is_standin_verdict,
                    "lean_messages": [message.as_dict() for message in verification.messages] if verification else [],
                    "checked_code": result.checked_code,
                },
                ensure_ascii=False,
            )
        )
    print(json.dumps({"verifier": verifier.stats()}), file=sys.stderr)
    if rows and all(result.is_censored for result in scored):
        # Every answer censored is an outage, not a verdict: scripts must not read the nulls as scores.
        raise CommandError(f"no answer was decided: all {len(rows)} were censored (the Lean server at "
                           f"{config.verifier.url} failed or could not decide); check it and score again",
                           EXIT_NOTHING_DECIDED)
    return 0
