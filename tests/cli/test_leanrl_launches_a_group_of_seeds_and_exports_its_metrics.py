"""``leanrl groups launch … seeds=3`` launches one configuration on three seeds through the same group launch as
the form and the API; ``groups show`` lists the runs, ``groups export`` downloads every run's metrics as Parquet."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from runs.models import Quota, RunGroup, StepMetrics
from trainer.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_group_is_launched_shown_and_exported_from_the_terminal(alice, promptset_version, platform_processes,
                                                                   leanrl, tmp_path):
    from accounts.models import ApiToken, TokenScope

    Quota.objects.create(user=alice, max_concurrent_runs=4, max_gpus=0)
    _, token = ApiToken.issue(alice, "terminal", scope=TokenScope.LAUNCH)
    assert leanrl("login", "--server", platform_processes["url"], "--token", token).returncode == 0
    assert "seeds" in leanrl("groups", "launch", "--fields").stdout

    too_many = leanrl("groups", "launch", "name=seeds", f"promptset_version_id={promptset_version.pk}",
                      "preset=cpu-smoke", "seeds=5")
    assert too_many.returncode == 3
    assert "the launch would start 5 runs, more than alice's limit of 4 concurrent runs" in too_many.stderr

    launched = leanrl("groups", "launch", "name=three seeds", f"promptset_version_id={promptset_version.pk}",
                      "preset=cpu-smoke", "seeds=3")
    assert launched.returncode == 0, launched.stderr
    group = RunGroup.objects.get(pk=int(launched.stdout.split()[1]))
    first_seed = RunConfig.from_preset("cpu-smoke").schedule.seed
    assert sorted(run.resolved_config.schedule.seed for run in group.runs.all()) == [
        first_seed, first_seed + 1, first_seed + 2]
    shown = leanrl("groups", "show", str(group.pk))
    assert shown.returncode == 0 and shown.stdout.count("\tseed ") == 3

    runs = list(group.runs.order_by("pk"))
    for run, reward in zip(runs, (0.25, 0.5, 0.75), strict=True):
        StepMetrics.objects.create(run=run, step=1, values={"reward/mean": reward})
    exported = leanrl("groups", "export", str(group.pk), "--format", "parquet", "-o", str(tmp_path / "g.parquet"))
    assert exported.returncode == 0, exported.stderr
    table = pq.read_table(tmp_path / "g.parquet").to_pylist()
    assert sorted((row["run_id"], row["seed"], row["reward/mean"]) for row in table) == [
        (run.pk, first_seed + index, reward) for index, (run, reward) in enumerate(zip(runs, (0.25, 0.5, 0.75)))]
