"""Launch a run from the command line, through the same launch contract as the form and the API."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runs import actions, launch_contract
from runs.models import RunKind
from trainer.fields import parse_assignments


class Command(BaseCommand):
    help = ("Launch a run as USERNAME through the launch contract (runs/launch_contract.py): the same fields, "
            "bounds and refusals as the launch form and POST /api/runs/.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", required=True)
        parser.add_argument("--promptset-version", type=int, required=True, help="The promptset version's id.")
        parser.add_argument("--preset", default="cpu-demo")
        parser.add_argument("--kind", default="rl", choices=RunKind.values,
                            help="rl, sft, or eval (pass@k of --model or --starting-checkpoint; "
                                 "--set eval_samples=K, --set error_correction=false).")
        parser.add_argument("--model", help="A model of the registry, by name.")
        parser.add_argument("--starting-checkpoint", type=int, help="The id of a checkpoint the user may see.")
        parser.add_argument("--set", dest="settings", action="append", default=[], metavar="FIELD=VALUE",
                            help=f"A launch field, e.g. total_steps=50 (fields: {', '.join(launch_contract.SETTABLE_FIELDS)})")

    def handle(self, *args, username, name, promptset_version, preset, kind, model, starting_checkpoint, settings,
               **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}")
        try:
            chosen = parse_assignments(settings)
        except ValueError as error:
            raise CommandError(f"--set {error}") from None
        request = {"name": name, "promptset_version_id": promptset_version, "preset": preset, "kind": kind,
                   "model": model, "starting_checkpoint_id": starting_checkpoint, **chosen}
        try:
            run = actions.launch_run(owner=user, request=request)
        except actions.LaunchError as error:
            lines = [f"  {field}: {message}" for field, messages in error.field_errors.items() for message in messages]
            raise CommandError(f"{error}:\n" + "\n".join(lines))
        self.stdout.write(f"run {run.pk} queued: {run.get_absolute_url()}")
