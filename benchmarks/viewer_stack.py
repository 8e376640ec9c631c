"""Shared set-up of the viewer benchmarks: throwaway embedded services and a seeded run (not a benchmark itself)."""

from __future__ import annotations

import os
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "platform")]


def start_services(*, with_redis: bool) -> tuple[list, Path]:
    """A PostgreSQL (and a Redis) of its own in a temporary folder; sets DATABASE_URL / REDIS_URL."""
    from deploy.services import PostgresService, RedisService, free_port

    root = Path(tempfile.mkdtemp(prefix="leanrl-viewer-bench-"))
    os.chmod(root, 0o755)
    services = [PostgresService(name="postgres", port=free_port(), log_dir=root / "logs", data_dir=root / "postgres")]
    if with_redis:
        services.append(RedisService(name="redis", port=free_port(), log_dir=root / "logs", data_dir=root / "redis"))
    for service in services:
        service.start()
    os.environ["DATABASE_URL"] = services[0].url
    os.environ["REDIS_URL"] = services[1].url if with_redis else "redis://127.0.0.1:1/0"
    os.environ["ARTIFACTS_DIR"] = str(root / "artifacts")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    return services, root


def set_up_django() -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    import config.asgi  # noqa: F401 - the web process's own start-up (it freezes what start-up made): pages are timed as uvicorn serves them


def start_web_and_ingester(root: Path) -> tuple[int, list]:
    """The ASGI server (uvicorn) and the event ingester, as the stack runs them; returns the port and both."""
    from deploy.services import PlatformProcess, free_port

    port = free_port()
    processes = [
        PlatformProcess(name="web", port=port, log_dir=root / "logs", argv=[
            sys.executable, "-m", "uvicorn", "config.asgi:application", "--app-dir", "platform",
            "--host", "127.0.0.1", "--port", str(port), "--ws", "websockets", "--log-level", "warning"]),
        PlatformProcess(name="ingester", port=0, log_dir=root / "logs", has_port=False,
                        argv=[sys.executable, "manage.py", "ingest_events"]),
    ]
    started = []
    try:
        for process in processes:
            process.start()
            started.append(process)
    except BaseException:
        for process in reversed(started):
            process.stop()
        raise
    return port, processes


def make_owner_and_version():
    from django.contrib.auth import get_user_model

    from promptsets.models import Problem, Promptset, PromptsetVersion, VersionProblem, statement_hash

    owner = get_user_model().objects.create_user("bench", password="bench-password")
    promptset = Promptset.objects.create(owner=owner, name="bench")
    version = PromptsetVersion.objects.create(promptset=promptset, number=1, problem_count=1)
    statement = "theorem p : (2 : ℕ) + 3 = 5 := by"
    problem = Problem.objects.create(promptset=promptset, problem_key="p0", name="p0", formal_statement=statement,
                                     header="import Mathlib", statement_hash=statement_hash(statement))
    VersionProblem.objects.create(version=version, problem=problem, position=0)
    return owner, version


def make_run(owner, version, name: str, state: str = "running"):
    from runs.models import Run
    from trainer.config import RunConfig

    return Run.objects.create(owner=owner, name=name, promptset_version=version, preset="cpu-demo",
                              config=RunConfig.from_preset("cpu-demo").to_json_dict(), state=state)


def seed_attempts(run, count: int, *, per_step: int = 2048, batch: int = 5000, seed: int = 0) -> None:
    """``count`` rollouts shaped like the recipe's: 2,048 a step, half retries once the buffer fills."""
    from proofs.models import ProofAttempt

    rng = random.Random(seed)
    reasoning = "Let me think about the statement. " * 20
    code = "theorem p (x : 𝔽) : x ≤ x := by\n  intro h\n  simp [le_refl]\n  exact h₀\n"
    prompt = "Complete the following Lean 4 code:\n" + code * 10
    tactics = ["omega", "linarith", "nlinarith", "norm_num", "simp", "ring_nf", "decide", "positivity", "field_simp",
               "aesop", "exact", "intro", "induction", "cases", "rcases", "constructor", "use", "calc", "gcongr"]
    rows = []
    for index in range(count):
        step = index // per_step
        verdict = rng.choice(["valid", "lean_error", "lean_error", "sorry", "infra_error", ""])
        # Answers of varied words for the text search: tactics, numbers, and a rare lemma name in 1 of 200.
        words = rng.choices(tactics, k=40) + [str(rng.randrange(1000)) for _ in range(10)]
        if rng.random() < 0.005:
            words.append("Nat.succ_le_of_lt")
        response = f"<think>{reasoning}{' '.join(words)}</think>\n```lean4\n{code}```"
        rows.append(ProofAttempt(
            run=run, rollout_key=f"s{step}-k{index}", step=step, problem_key=f"p{rng.randrange(244)}",
            problem_name="p", turn="retry" if step and rng.random() < 0.5 else "first", verdict=verdict,
            format_error="no_valid_think_block" if verdict == "" else "", reasoning=reasoning, lean_code=code,
            checked_code="import Mathlib\n" + code, prompt=prompt, response=response,
            lean_messages=[{"severity": "error", "line": 3, "column": 2, "end_line": 3, "end_column": 6, "text": "simp failed"}]
            if verdict == "lean_error" else [],
            reward=None if verdict == "infra_error" else 1.0 if verdict == "valid" else 0.0,
            is_censored=verdict == "infra_error", num_tokens=rng.randrange(100, 4000),
        ))
        if len(rows) == batch:
            ProofAttempt.objects.bulk_create(rows)
            rows = []
    if rows:
        ProofAttempt.objects.bulk_create(rows)


def seed_history(run, steps: int) -> None:
    """Metrics, evaluations and log lines of ``steps`` steps, as the ingester stores them."""
    from django.utils import timezone

    from runs.models import Evaluation, RunEvent, StepMetrics

    StepMetrics.objects.bulk_create([StepMetrics(run=run, step=s, values={
        "reward/mean": s / steps, "lean/accuracy": s / steps / 2, "format_errors": {"no_valid_think_block": 100 - s},
        "response_length/mean": 1800.0, "response_length/max": 24576, "time/generation_s": 300.0,
        "time/learning_s": 120.0, "generation/tokens_per_second": 9000.0}) for s in range(steps)])
    Evaluation.objects.bulk_create([Evaluation(run=run, step=s, values={"pass@1": 0.3, "pass@8": 0.6, "retry/pass@8": 0.7})
                                    for s in range(0, steps, 5)])
    now = timezone.now()
    RunEvent.objects.bulk_create([RunEvent(run=run, event_id=f"{run.pk}-log-{i}", seq=i, run_seq=i + 1, type="log",
                                           payload={"level": "info", "message": f"line {i}"}, published_at=now)
                                  for i in range(2000)])


def session_cookie(owner) -> str:
    """A Cookie header value that logs a page or WebSocket in as ``owner`` (a session made by Django's test client)."""
    from django.test import Client

    client = Client()
    client.force_login(owner)
    return f"sessionid={client.cookies['sessionid'].value}"


def stop_everything(processes: list, services: list, root: Path) -> None:
    """Close the benchmark's database connections, stop its platform processes then its services (newest
    first), and remove its throwaway folder."""
    import shutil

    from django.db import connections

    connections.close_all()
    for process in reversed(processes):
        process.stop()
    for service in reversed(services):
        service.stop()
    shutil.rmtree(root, ignore_errors=True)
