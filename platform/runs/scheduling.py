"""The run queue: which queued runs may start now, so that no one person starves the lab.

As Determined's resource pools and Ray's job queue do it: a launched run is stored as queued and
waits until the scheduler *admits* it; only then is it dispatched to Ray. A run is admitted when

- an administrator has not paused the queue (``QueueState``: running runs go on, nothing new starts),
- its owner stays within their limits on concurrent runs and on GPUs (a ``Quota`` row for the
  person, else the deployment's defaults), and within every limit of a group they belong to
  (a group's runs counted together).

Runs leave the queue by priority (an administrator sets it), then in the order they were queued.
One person's full quota never holds up another's runs: each waiting run is judged on its own.
``schedule`` runs after every launch, resume and ending (``Run.transition`` signals ``state_changed``,
runs/signals.py), under a Postgres advisory lock so that two processes cannot admit past a limit
together. Each waiting run keeps the reason it waits (``Run.queue_reason``), shown with its place on
the runs page.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from runs.cluster import gpus_used
from runs.models import FINAL_STATES, QueueState, Quota, Run, RunState
from runs.signals import run_admitted

logger = logging.getLogger(__name__)

# Any constant that no other advisory lock of this database uses.
_SCHEDULER_LOCK = 0x1EA4_0013


@dataclass(frozen=True)
class Limits:
    max_concurrent_runs: int
    max_gpus: int
    holder: str  # whose limit it is, in the words the queue shows


@dataclass
class Usage:
    runs: int = 0
    gpus: int = 0
    members: set[int] = field(default_factory=set)


def run_gpus(run: Run) -> int:
    """What the run holds while it runs: what dispatch reserves from Ray for it (cluster.gpus_used)."""
    return gpus_used(int((run.config.get("cluster") or {}).get("num_gpus", 0) or 0), run.kind)


def user_limits(user) -> Limits:
    quota = Quota.objects.filter(user=user).first()
    if quota is not None:
        return Limits(quota.max_concurrent_runs, quota.max_gpus, f"{user.username}'s")
    return Limits(settings.RUN_QUOTA_DEFAULT_CONCURRENT_RUNS, settings.RUN_QUOTA_DEFAULT_GPUS, f"{user.username}'s")


def user_priority(user) -> int:
    return Quota.objects.filter(user=user).values_list("priority", flat=True).first() or 0


def limit_problem(user, gpus: int) -> str | None:
    """Why a run of ``gpus`` GPUs could never start for ``user`` (checked at launch), or None."""
    limits = [user_limits(user), *(_group_limits(user).values())]
    for limit in limits:
        if gpus > limit.max_gpus:
            return (f"the run needs {gpus} GPUs, more than {limit.holder} limit of {limit.max_gpus}: choose a smaller "
                    "preset, or ask an administrator to raise the limit")
        if limit.max_concurrent_runs == 0:
            return f"{limit.holder} limit on concurrent runs is 0: ask an administrator for a quota"
    return None


def group_size_problem(user, runs: int) -> str | None:
    """Why a group of ``runs`` runs is refused for ``user``, or None: it must fit within every concurrent-run limit
    that applies, so that its seeds run side by side; a group larger than that would have some seeds finish before
    others start, and a comparison made meanwhile would set a group's whole against another's part."""
    for limit in [user_limits(user), *(_group_limits(user).values())]:
        if runs > limit.max_concurrent_runs:
            return (f"the launch would start {runs} runs, more than {limit.holder} limit of "
                    f"{limit.max_concurrent_runs} concurrent runs: use fewer seeds or a smaller grid, or ask an "
                    "administrator to raise the limit")
    return None


def _group_limits(user) -> dict[int, Limits]:
    return {quota.group_id: Limits(quota.max_concurrent_runs, quota.max_gpus, f"the group {quota.group.name}'s")
            for quota in Quota.objects.filter(group__in=user.groups.all()).select_related("group")}


def _holding():
    """Runs that hold a slot: admitted (still queued for dispatch), starting or running."""
    return Run.objects.filter(Q(state__in=(RunState.STARTING, RunState.RUNNING))
                              | Q(state=RunState.QUEUED, admitted_at__isnull=False))


def waiting():
    """Queued runs the scheduler has not admitted, in the order they leave the queue."""
    return Run.objects.filter(state=RunState.QUEUED, admitted_at__isnull=True).order_by("-priority", "queued_at", "pk")


def schedule() -> list[int]:
    """Admit every waiting run that fits; record why the others wait. Returns the admitted runs' ids.

    Each admission, once committed, is announced (``run_admitted``): runs.actions dispatches it."""
    admitted: list[int] = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_SCHEDULER_LOCK])
        queue = QueueState.current()
        candidates = list(waiting().select_related("owner"))
        if not candidates:
            return []
        per_user: dict[int, Usage] = {}
        for run in _holding().only("owner_id", "config"):
            usage = per_user.setdefault(run.owner_id, Usage())
            usage.runs += 1
            usage.gpus += run_gpus(run)
        limits_of: dict[int, tuple[Limits, dict[int, Limits]]] = {}
        group_members: dict[int, set[int]] = {}
        for run in candidates:
            owner = run.owner
            if owner.pk not in limits_of:
                limits_of[owner.pk] = (user_limits(owner), _group_limits(owner))
            own, groups = limits_of[owner.pk]
            for group_id in groups:
                if group_id not in group_members:
                    group_members[group_id] = set(get_user_model().objects.filter(groups=group_id)
                                                  .values_list("pk", flat=True))
            gpus = run_gpus(run)
            reason = "the queue is paused by an administrator" + (f": {queue.reason}" if queue.reason else "") \
                if queue.is_paused else _blocking_reason(owner.pk, gpus, own, groups, per_user, group_members)
            if reason is None:
                now = timezone.now()
                if Run.objects.filter(pk=run.pk, state=RunState.QUEUED, admitted_at__isnull=True).update(
                        admitted_at=now, queue_reason="", updated_at=now):
                    usage = per_user.setdefault(owner.pk, Usage())
                    usage.runs += 1
                    usage.gpus += gpus
                    admitted.append(run.pk)
            elif reason != run.queue_reason:
                Run.objects.filter(pk=run.pk).update(queue_reason=reason[:300])
        for run_id in admitted:
            transaction.on_commit(lambda run_id=run_id: run_admitted.send(sender=Run, run_id=run_id))
    return admitted


def _blocking_reason(owner_id: int, gpus: int, own: Limits, groups: dict[int, Limits],
                     per_user: dict[int, Usage], group_members: dict[int, set[int]]) -> str | None:
    usage = per_user.get(owner_id, Usage())
    checks = [(own, usage.runs, usage.gpus)]
    for group_id, limit in groups.items():
        members = group_members[group_id]
        checks.append((limit, sum(per_user.get(m, Usage()).runs for m in members),
                       sum(per_user.get(m, Usage()).gpus for m in members)))
    for limit, runs, used_gpus in checks:
        if runs >= limit.max_concurrent_runs:
            return (f"waiting for a slot: {limit.holder} runs hold {runs} of {limit.max_concurrent_runs} "
                    "concurrent runs")
        if used_gpus + gpus > limit.max_gpus:
            return (f"waiting for GPUs: {limit.holder} runs hold {used_gpus} of {limit.max_gpus} GPUs and this run "
                    f"needs {gpus}")
    return None


def schedule_when_a_slot_changes(sender, *, run: Run, state: RunState, **kwargs) -> None:
    """``state_changed``'s listener: a slot freed or a run waits, so let the queue move once the change
    is committed."""
    if state in FINAL_STATES or state == RunState.QUEUED:
        transaction.on_commit(schedule_soon)


def schedule_soon() -> None:
    """``schedule`` after a commit; a failure is logged, never raised into the change that freed the slot."""
    try:
        schedule()
    except Exception:  # the next launch, ending or sweep schedules again
        logger.exception("the run scheduler failed; the queue moves at the next launch or ending")


def queue_positions() -> dict[int, int]:
    """Run id → its 1-based place among the waiting runs of everyone (ids only: nothing private leaks)."""
    return {run_id: position for position, run_id in enumerate(waiting().values_list("pk", flat=True), start=1)}


def queue_of(user) -> list[dict]:
    """The waiting runs ``user`` may see, each with its place in the whole queue and why it waits.

    Places count everyone's runs, so a person sees how many are ahead; others' private runs are
    counted, never named.
    """
    positions = queue_positions()
    mine = Run.objects.visible_to(user).filter(pk__in=positions)
    rows = [{"position": positions[run.pk], "id": run.pk, "name": run.name, "url": run.get_absolute_url(),
             "owner": run.owner.username, "priority": run.priority,
             "reason": run.waiting_for} for run in mine.select_related("owner")]
    return sorted(rows, key=lambda row: row["position"])
