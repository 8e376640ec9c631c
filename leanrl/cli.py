"""``leanrl``: the platform from a terminal.

    leanrl login --server https://leanrl.lab.example          # asks for an API token, checks it, saves it
    leanrl promptsets upload problems.jsonl --name minif2f
    leanrl promptsets import --dataset AI-MO/Kimina-Prover-Promptset --split train --name kimina
    leanrl runs launch name=demo promptset_version_id=3 preset=cpu-demo learning_rate=1e-5
    leanrl groups launch name=lr promptset_version_id=3 preset=cpu-smoke seeds=3 'grid={"learning_rate": [1e-5, 2e-5]}'
    leanrl runs follow 12                                      # a progress bar per step, the last rollouts
    leanrl pipelines launch name=loop training_version_id=3 benchmark_version_id=4 'rl_fields={"total_steps": 2}'
    leanrl rollouts 12 --verdict lean_error > failed.jsonl     # JSON Lines
    leanrl checkpoints download 12 20 -o model.zip

The server and token come from ``leanrl login`` (saved in ``$LEANRL_CONFIG``, by default
``~/.config/leanrl/credentials.json``, readable by its owner only), or from the environment
(``LEANRL_SERVER``, ``LEANRL_TOKEN``), which wins. Every refusal is one line on standard error
with the server's own explanation; exit codes: 0 done, 1 the run failed or was cancelled
(``follow``), 2 a usage mistake, 3 the server refused or could not be reached.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
from pathlib import Path

import httpx
from tqdm import tqdm

from leanrl.assignments import expected, read_assignments
from leanrl.client import ApiError, PlatformClient

EXIT_RUN_DID_NOT_SUCCEED = 1
EXIT_USAGE = 2
EXIT_SERVER = 3
FINAL_STATES = ("succeeded", "failed", "cancelled")


class UsageError(Exception):
    pass


# --- credentials -------------------------------------------------------------------------------


def config_path() -> Path:
    return Path(os.environ.get("LEANRL_CONFIG") or Path.home() / ".config" / "leanrl" / "credentials.json")


def saved_credentials() -> dict:
    path = config_path()
    saved = json.loads(path.read_text()) if path.is_file() else {}
    server = os.environ.get("LEANRL_SERVER") or saved.get("server")
    token = os.environ.get("LEANRL_TOKEN") or saved.get("token")
    if not server or not token:
        raise UsageError("not logged in: run `leanrl login --server URL` (or set LEANRL_SERVER and LEANRL_TOKEN)")
    return {"server": server, "token": token}


def login(args) -> int:
    token = args.token or os.environ.get("LEANRL_TOKEN") or getpass.getpass("API token (from the 'API tokens' page): ")
    client = PlatformClient(args.server, token.strip())
    try:
        client.call("runs_api_list_runs")  # a request that needs the token: refuses a wrong one now
    finally:
        client.close()
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(json.dumps({"server": args.server.rstrip("/"), "token": token.strip()}))
    print(f"logged in to {args.server}; credentials saved in {path}")
    return 0


# --- promptsets -------------------------------------------------------------------------------


def promptsets_list(client: PlatformClient, args) -> int:
    for promptset in client.call("promptsets_api_list_promptsets"):
        versions = ", ".join(f"v{v['number']} ({v['problem_count']} problems, version id {v['id']})"
                             for v in promptset["versions"])
        print(f"{promptset['id']}\t{promptset['name']}\t{promptset['owner']}\t{versions}")
    return 0


def promptsets_upload(client: PlatformClient, args) -> int:
    file = Path(args.file)
    if not file.is_file():
        raise UsageError(f"{args.file}: no such file")
    form = {"name": args.name, "is_public": str(args.public).lower(), "skip_invalid_rows": str(args.skip_invalid).lower()}
    if args.description:
        form["description"] = args.description
    with file.open("rb") as handle:
        upload = client.call("promptsets_api_upload_promptset", data=form, files={"file": (file.name, handle)})
    return follow_upload(client, upload, file.name)


def promptsets_import(client: PlatformClient, args) -> int:
    """A dataset from the Hub, or a dataset folder on the server: the server's worker reads it, then checks it."""
    body = {"name": args.name, "is_public": args.public, "skip_invalid_rows": args.skip_invalid, "split": args.split}
    body.update({key: value for key, value in (("dataset", args.dataset), ("folder", args.folder),
                                               ("config", args.config), ("revision", args.revision),
                                               ("description", args.description)) if value})
    upload = client.call("promptsets_api_import_dataset", json_body=body)
    return follow_upload(client, upload, args.name)


def add_new_promptset_arguments(sub) -> None:
    """What upload and import ask of the promptset they make: its name, description and sharing, and what
    to do with invalid rows."""
    sub.add_argument("--name", required=True)
    sub.add_argument("--description", default="")
    sub.add_argument("--public", action="store_true", help="Visible to every signed-in person.")
    sub.add_argument("--skip-invalid", action="store_true", help="Store the valid rows, list the rejected ones.")


def follow_upload(client: PlatformClient, upload: dict, label: str) -> int:
    """Follow an upload until the server's worker has imported or rejected it; say which, and why."""
    staged = -1
    while not upload["is_finished"]:
        if upload["state"] == "staging" and upload["rows_read"] != staged:
            staged = upload["rows_read"]
            print(f"{label}: {staged:,} rows read from the dataset", file=sys.stderr)
        time.sleep(0.5)
        upload = client.call("promptsets_api_get_upload", path={"upload_id": upload["id"]})
    report = upload.get("report") or {}
    if upload["state"] != "imported":
        rejected = "\n".join(f"  row {r['row']}: {r['reason']}" for r in report.get("rejections", [])[:20])
        print(f"{label}: {upload['failure'] or 'rejected'}" + (f"\n{rejected}" if rejected else ""), file=sys.stderr)
        return EXIT_SERVER
    promptset = client.call("promptsets_api_get_promptset", path={"promptset_id": upload["promptset_id"]})
    version = promptset["versions"][-1]
    print(f"promptset {promptset['id']} {promptset['name']!r}: version {version['number']} (version id {version['id']}) "
          f"with {version['problem_count']} problems; {report.get('rows_rejected', 0)} rows rejected")
    return 0


# --- runs --------------------------------------------------------------------------------------


def launch(client: PlatformClient, args, operation: str, command: str) -> dict | None:
    """What runs, groups and pipelines launch alike: ``--fields`` lists the operation's body fields (None), else
    the ``name=value`` assignments are checked against them and sent; the created thing is returned."""
    fields = client.body_fields(operation)
    if args.fields:
        for name, spec in fields.items():
            flag = "required" if spec["required"] else f"default {json.dumps(spec.get('default'))}"
            print(f"{name}\t{expected(spec)}\t{flag}\t{spec.get('description', '')}")
        return None
    try:
        body = read_assignments(args.field, fields)
    except ValueError as error:
        raise UsageError(f"{error} (see `leanrl {command} --fields`)") from None
    return client.call(operation, json_body=body)


def print_state(kind: str, thing: dict) -> int:
    print(f"{kind} {thing['id']}: {thing['state']}")
    return 0


def runs_launch(client: PlatformClient, args) -> int:
    if run := launch(client, args, "runs_api_launch_run", "runs launch"):
        print(f"run {run['id']} {run['name']!r} queued; follow it with `leanrl runs follow {run['id']}`")
    return 0


# --- pipelines ---------------------------------------------------------------------------------


def pipelines_launch(client: PlatformClient, args) -> int:
    if pipeline := launch(client, args, "pipelines_api_launch_pipeline", "pipelines launch"):
        print(f"pipeline {pipeline['id']} {pipeline['name']!r} started; see it with "
              f"`leanrl pipelines show {pipeline['id']}`")
    return 0


def pipelines_list(client: PlatformClient, args) -> int:
    for pipeline in client.call("pipelines_api_list_pipelines"):
        print(f"{pipeline['id']}\t{pipeline['state']}\t{pipeline['preset']}\t{pipeline['name']}")
    return 0


def pipelines_show(client: PlatformClient, args) -> int:
    print(json.dumps(client.call("pipelines_api_pipeline_detail", path={"pipeline_id": args.pipeline}), indent=2))
    return 0


def pipelines_cancel(client: PlatformClient, args) -> int:
    return print_state("pipeline", client.call("pipelines_api_cancel", path={"pipeline_id": args.pipeline}))


def pipelines_retry(client: PlatformClient, args) -> int:
    return print_state("pipeline", client.call("pipelines_api_retry", path={"pipeline_id": args.pipeline}))


def runs_list(client: PlatformClient, args) -> int:
    for run in client.call("runs_api_list_runs"):
        print(f"{run['id']}\t{run['state']}\tstep {run['current_step']}\t{run['preset']}\t{run['name']}")
    return 0


def runs_show(client: PlatformClient, args) -> int:
    print(json.dumps(client.call("runs_api_get_run", path={"run_id": args.run}), indent=2))
    return 0


def runs_cancel(client: PlatformClient, args) -> int:
    return print_state("run", client.call("runs_api_cancel_run", path={"run_id": args.run}))


def runs_resume(client: PlatformClient, args) -> int:
    return print_state("run", client.call("runs_api_resume_run", path={"run_id": args.run}))


def groups_launch(client: PlatformClient, args) -> int:
    """A group: the launch fields, plus seeds (runs of each configuration) and grid (field → values)."""
    if group := launch(client, args, "runs_api_launch_group", "groups launch"):
        print(f"group {group['id']} {group['name']!r} queued: {len(group['runs'])} runs; see it with "
              f"`leanrl groups show {group['id']}`")
    return 0


def _print_group(group: dict) -> None:
    print(f"group {group['id']} {group['name']!r}: {len(group['runs'])} runs")
    for run in group["runs"]:
        cell = ", ".join(f"{name}={value}" for name, value in run["cell"].items())
        print(f"{run['id']}\t{run['state']}\tstep {run['current_step']}\tseed {run['seed']}\t{cell}")


def groups_show(client: PlatformClient, args) -> int:
    _print_group(client.call("runs_api_get_group", path={"group_id": args.group}))
    return 0


def groups_cancel(client: PlatformClient, args) -> int:
    _print_group(client.call("runs_api_cancel_group", path={"group_id": args.group}))
    return 0


def groups_seed(client: PlatformClient, args) -> int:
    _print_group(client.call("runs_api_add_group_seed", path={"group_id": args.group}))
    return 0


def groups_export(client: PlatformClient, args) -> int:
    output = Path(args.output or f"group{args.group}-metrics.{args.format}")
    partial = output.with_name(output.name + ".part")
    with partial.open("wb") as destination:
        for _ in client.download(f"runs_api_group_metrics_{args.format}", destination, path={"group_id": args.group}):
            pass
    partial.replace(output)
    print(f"saved {output} ({output.stat().st_size} bytes)")
    return 0


def total_steps(run: dict) -> int | None:
    """Where the run ends, as the server works it out (epochs or steps, whichever comes first)."""
    return run.get("planned_steps") or None


def runs_follow(client: PlatformClient, args) -> int:
    """A progress bar over the run's steps, its latest rollouts as they arrive, and its final state."""
    run = client.call("runs_api_get_run", path={"run_id": args.run})
    bar = tqdm(total=total_steps(run), desc=f"run {run['id']} {run['name']}", unit="step", file=sys.stderr,
               dynamic_ncols=True)
    last_attempt = 0
    try:
        while True:
            run = client.call("runs_api_get_run", path={"run_id": args.run})
            series = client.call("runs_api_run_series", path={"run_id": args.run})
            bar.total = total_steps(run) or bar.total
            bar.n = run["current_step"]
            latest = series["metrics"][-1]["values"] if series.get("metrics") else {}
            reward = latest.get("reward/mean")
            bar.set_postfix_str(f"{run['state']}" + ("" if reward is None else f" · reward {reward:.2f}"))
            attempts = client.call("proofs_api_list_attempts", path={"run_id": args.run},
                                   params={"after_id": last_attempt, "limit": 200})
            if attempts:
                last_attempt = attempts[-1]["id"]
                for attempt in attempts[-args.rollouts:]:
                    bar.write(_rollout_line(attempt))
            if run["state"] in FINAL_STATES:
                break
            time.sleep(args.interval)
    finally:
        bar.close()
    reason = f": {run['failure_reason']}" if run.get("failure_reason") else ""
    print(f"run {run['id']} {run['state']} at step {run['current_step']}{reason}")
    return 0 if run["state"] == "succeeded" else EXIT_RUN_DID_NOT_SUCCEED


def _rollout_line(attempt: dict) -> str:
    if attempt.get("is_censored"):
        outcome = "censored"
    elif attempt.get("format_error"):
        outcome = f"format: {attempt['format_error']}"
    else:
        outcome = attempt.get("verdict") or "not checked"
    reward = "–" if attempt.get("reward") is None else f"{attempt['reward']:g}"
    when = f"evaluation of step {attempt['step']}" if attempt.get("is_evaluation") else f"step {attempt['step']}"
    return f"  {when} {attempt['turn']:<5} {attempt['problem_key']}: {outcome} (reward {reward})"


# --- rollouts and checkpoints ------------------------------------------------------------------


def rollouts(client: PlatformClient, args) -> int:
    """Every rollout of the run as JSON Lines, oldest first, fetched in pages."""
    after, written = 0, 0
    while True:
        page = client.call("proofs_api_list_attempts", path={"run_id": args.run},
                           params={"after_id": after, "limit": 200})
        if not page:
            break
        for attempt in page:
            after = attempt["id"]
            if args.step is not None and attempt["step"] != args.step:
                continue
            if args.verdict and attempt["verdict"] != args.verdict:
                continue
            if args.turn and attempt["turn"] != args.turn:
                continue
            if args.round is not None and attempt["round"] != args.round:
                continue
            sys.stdout.write(json.dumps(attempt, ensure_ascii=False) + "\n")
            written += 1
    print(f"{written} rollouts", file=sys.stderr)
    return 0


def checkpoints_list(client: PlatformClient, args) -> int:
    for checkpoint in client.call("runs_api_list_checkpoints", path={"run_id": args.run}):
        where = (f"{client.server}{checkpoint['model_url']}" if checkpoint["model_url"]
                 else f"deleted: {checkpoint['removal_reason']}")
        print(f"step {checkpoint['step']}\t{checkpoint['created_at']}\t{where}")
    return 0


def checkpoints_download(client: PlatformClient, args) -> int:
    part = "checkpoint" if args.whole else "model"
    output = Path(args.output or f"run{args.run}-step{args.step:06d}-{part}.zip")
    partial = output.with_name(output.name + ".part")
    with partial.open("wb") as destination, tqdm(unit="B", unit_scale=True, desc=output.name, file=sys.stderr) as bar:
        for written in client.download("runs_api_download_checkpoint", destination,
                                       path={"run_id": args.run, "step": args.step, "part": part}):
            bar.update(written - bar.n)
    partial.replace(output)  # never leave a half-downloaded file under the final name
    print(f"saved {output} ({output.stat().st_size} bytes)")
    return 0


# --- the command line ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leanrl", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub = commands.add_parser("login", help="Save the server's address and an API token, after checking them.")
    sub.add_argument("--server", required=True, help="The platform's address, e.g. https://leanrl.lab.example")
    sub.add_argument("--token", help="An API token (default: asked for, not echoed).")
    sub.set_defaults(handler=login, needs_client=False)

    promptsets = commands.add_parser("promptsets", help="List, upload or import promptsets.").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    sub = promptsets.add_parser("list", help="Your promptsets and the public ones, with their versions.")
    sub.set_defaults(handler=promptsets_list)
    sub = promptsets.add_parser("upload", help="Upload a JSON Lines, JSON, Parquet or CSV file as a new promptset.")
    sub.add_argument("file")
    add_new_promptset_arguments(sub)
    sub.set_defaults(handler=promptsets_upload)
    sub = promptsets.add_parser("import", help="Import a dataset from the Hugging Face Hub, or a dataset folder on "
                                               "the server, as a new promptset.")
    where = sub.add_mutually_exclusive_group(required=True)
    where.add_argument("--dataset", help="owner/name on the Hub, e.g. AI-MO/Kimina-Prover-Promptset (the server "
                                         "must reach the Hub).")
    where.add_argument("--folder", help="A dataset folder on the server, under one of its PROMPTSET_IMPORT_ROOTS.")
    sub.add_argument("--config", help="The dataset's config (default: its default one).")
    sub.add_argument("--split", default="train", help="Default: train.")
    sub.add_argument("--revision", help="A branch, tag or commit (default: main).")
    add_new_promptset_arguments(sub)
    sub.set_defaults(handler=promptsets_import)

    runs = commands.add_parser("runs", help="Launch, list, follow, cancel or resume runs.").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    sub = runs.add_parser("launch", help="Launch a run: FIELD=VALUE pairs, the same fields as the launch form, each "
                                         "value read by the field's type in the server's schema.")
    sub.add_argument("field", nargs="*", metavar="FIELD=VALUE")
    sub.add_argument("--fields", action="store_true", help="List the fields the server takes, and stop.")
    sub.set_defaults(handler=runs_launch)
    pipelines = commands.add_parser("pipelines", help="Launch, list, show, cancel or retry expert-iteration "
                                                      "pipelines.").add_subparsers(dest="action", required=True,
                                                                                   metavar="ACTION")
    sub = pipelines.add_parser("launch", help="Launch a pipeline: FIELD=VALUE pairs, the same fields as its form "
                                              "(sft_fields and rl_fields as JSON objects).")
    sub.add_argument("field", nargs="*", metavar="FIELD=VALUE")
    sub.add_argument("--fields", action="store_true", help="List the fields the server takes, and stop.")
    sub.set_defaults(handler=pipelines_launch)
    sub = pipelines.add_parser("list", help="Your pipelines.")
    sub.set_defaults(handler=pipelines_list)
    for name, handler, text in (("show", pipelines_show, "One pipeline as JSON: stages, iterations, lineage."),
                                ("cancel", pipelines_cancel, "Cancel a pipeline and its current run."),
                                ("retry", pipelines_retry, "Retry a failed pipeline's stage.")):
        sub = pipelines.add_parser(name, help=text)
        sub.add_argument("pipeline", type=int)
        sub.set_defaults(handler=handler)
    sub = runs.add_parser("list", help="Runs you can see.")
    sub.set_defaults(handler=runs_list)
    for name, handler, text in (("show", runs_show, "One run as JSON."), ("cancel", runs_cancel, "Stop a run."),
                                ("resume", runs_resume, "Queue a failed or cancelled run again.")):
        sub = runs.add_parser(name, help=text)
        sub.add_argument("run", type=int)
        sub.set_defaults(handler=handler)
    sub = runs.add_parser("follow", help="Watch a run live until it ends: progress per step, the last rollouts.")
    sub.add_argument("run", type=int)
    sub.add_argument("--rollouts", type=int, default=3, help="Rollouts printed per refresh (default: 3).")
    sub.add_argument("--interval", type=float, default=2.0, help="Seconds between refreshes (default: 2).")
    sub.set_defaults(handler=runs_follow)

    groups = commands.add_parser("groups", help="Launch a run group (seeds, a grid), show, cancel, add a seed, "
                                                "export its metrics.").add_subparsers(dest="action", required=True,
                                                                                      metavar="ACTION")
    sub = groups.add_parser("launch", help="Launch a group: the launch fields as FIELD=VALUE pairs, plus seeds=N and "
                                           "grid={\"FIELD\": [VALUE, …]} (each combination on N seeds).")
    sub.add_argument("field", nargs="*", metavar="FIELD=VALUE")
    sub.add_argument("--fields", action="store_true", help="List the fields the server takes, and stop.")
    sub.set_defaults(handler=groups_launch)
    for name, handler, text in (("show", groups_show, "Its runs: state, step, seed, cell."),
                                ("cancel", groups_cancel, "Cancel every run that has not ended."),
                                ("seed", groups_seed, "Launch one more seed of each cell.")):
        sub = groups.add_parser(name, help=text)
        sub.add_argument("group", type=int)
        sub.set_defaults(handler=handler)
    sub = groups.add_parser("export", help="Every run's metrics in one table, each row with its run, seed and cell.")
    sub.add_argument("group", type=int)
    sub.add_argument("--format", choices=("csv", "parquet"), default="csv")
    sub.add_argument("-o", "--output", help="File to write (default: group<id>-metrics.<format>).")
    sub.set_defaults(handler=groups_export)

    sub = commands.add_parser("rollouts", help="A run's rollouts as JSON Lines on standard output.")
    sub.add_argument("run", type=int)
    sub.add_argument("--step", type=int)
    sub.add_argument("--verdict", help="valid, lean_error, sorry, timeout, infra_error, …")
    sub.add_argument("--turn", choices=("first", "retry"))
    sub.add_argument("--round", type=int, help="The round of correction: 0 first attempts, 1 their retries, …")
    sub.set_defaults(handler=rollouts)

    checkpoints = commands.add_parser("checkpoints", help="List or download a run's checkpoints.").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    sub = checkpoints.add_parser("list")
    sub.add_argument("run", type=int)
    sub.set_defaults(handler=checkpoints_list)
    sub = checkpoints.add_parser("download", help="The model (a Hugging Face folder, zipped) or the whole checkpoint.")
    sub.add_argument("run", type=int)
    sub.add_argument("step", type=int)
    sub.add_argument("--whole", action="store_true", help="The whole checkpoint (optimizer state included).")
    sub.add_argument("-o", "--output", help="File to write (default: run<id>-step<step>-model.zip).")
    sub.set_defaults(handler=checkpoints_download)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if not getattr(args, "needs_client", True):
            return args.handler(args)
        credentials = saved_credentials()
        client = PlatformClient(credentials["server"], credentials["token"])
        try:
            return args.handler(client, args)
        finally:
            client.close()
    except UsageError as error:
        print(f"leanrl: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as error:
        print(f"leanrl: {error}", file=sys.stderr)
        return EXIT_SERVER
    except httpx.HTTPError as error:
        print(f"leanrl: cannot reach the server ({type(error).__name__}: {error}); check --server and the network",
              file=sys.stderr)
        return EXIT_SERVER
    except KeyboardInterrupt:
        print("leanrl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
