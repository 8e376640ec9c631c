"""The one place the platform speaks to Ray: submit, stop and ask about a run's job (Ray's job API)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from django.conf import settings


# Not one of Ray's states: the cluster has no record of the job (its head was restarted without it).
MISSING = "MISSING"


@dataclass(frozen=True)
class JobStatus:
    state: str  # PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED, or MISSING
    message: str

    @property
    def is_terminal(self) -> bool:
        return self.state in ("STOPPED", "SUCCEEDED", "FAILED", MISSING)


def client(address: str | None = None):
    """Ray's job client. Note that Ray lets the RAY_ADDRESS environment variable win over ``address``."""
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(address or settings.RAY_ADDRESS)


def trainer_entrypoint(run, *, resume: bool) -> str:
    """The shell command Ray runs: the trainer's driver, with the run's exported files.

    An RL run on several GPUs starts one trainer process per GPU through torchrun (data-parallel
    ranks, trainer/distributed.py); everything else runs as one process.
    """
    from trainer.config import RunConfig

    folder = run.artifacts_dir
    num_gpus = RunConfig.model_validate(run.config).cluster.num_gpus
    launcher = [settings.TRAINER_PYTHON]
    if run.kind == "rl" and num_gpus > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(num_gpus)]
    argv = [
        *launcher, "-m", "trainer", "run" if run.kind == "rl" else "sft",
        "--config", str(folder / "config.json"),
        "--promptset", str(folder / "promptset.jsonl"),
        "--output", str(folder),
        "--events", settings.TRAINER_REDIS_URL,
        "--run-id", str(run.pk),
    ]
    if resume:
        argv.append("--resume")
    return shlex.join(argv)


def submit(run, *, resume: bool) -> str:
    from runs.cluster import requested_resources
    from trainer.config import RunConfig

    requested = requested_resources(RunConfig.model_validate(run.config))
    env_vars = {"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if settings.LEAN_SERVER_API_KEY:
        env_vars["LEAN_SERVER_API_KEY"] = settings.LEAN_SERVER_API_KEY
    env_vars.update(settings.TRACKING_ENVIRONMENT)
    return client().submit_job(
        entrypoint=trainer_entrypoint(run, resume=resume),
        submission_id=f"run-{run.pk}-attempt-{run.attempt}",
        runtime_env={"env_vars": env_vars},
        metadata={"run_id": str(run.pk), "run_name": run.name[:100]},
        # The driver holds the run's resources itself (rollouts and learner share its GPUs).
        entrypoint_num_cpus=requested["num_cpus"],
        entrypoint_num_gpus=requested["num_gpus"] or None,
    )


def stop(job_id: str) -> None:
    client().stop_job(job_id)


def status(job_id: str) -> JobStatus:
    try:
        info = client().get_job_info(job_id)
    except RuntimeError as error:
        # Ray's job client reports an unknown job as "Request failed with status code 404: Job ... does not exist."
        if "status code 404" in str(error):
            return JobStatus(state=MISSING, message=str(error))
        raise
    return JobStatus(state=str(info.status.value if hasattr(info.status, "value") else info.status),
                     message=info.message or "")


def log_tail(job_id: str, lines: int = 25) -> str:
    try:
        logs = client().get_job_logs(job_id)
    except Exception as error:  # the logs are a courtesy for the failure reason, never a failure of their own
        return f"(job logs unavailable: {error})"
    return "\n".join(logs.splitlines()[-lines:])

