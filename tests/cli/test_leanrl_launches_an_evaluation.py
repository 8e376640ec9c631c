"""``leanrl runs launch kind=eval …`` launches an evaluation through the same launch contract as the form and the
API: the fields it reads from the server's schema include the evaluation's, and a k out of bounds is refused."""

from __future__ import annotations

import pytest

from runs.models import Run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_an_evaluation_is_launched_from_the_terminal(alice, promptset_version, platform_processes, leanrl):
    from accounts.models import ApiToken, TokenScope

    _, token = ApiToken.issue(alice, "terminal", scope=TokenScope.LAUNCH)
    assert leanrl("login", "--server", platform_processes["url"], "--token", token).returncode == 0
    fields = leanrl("runs", "launch", "--fields")
    assert "error_correction" in fields.stdout and "eval" in fields.stdout

    too_many = leanrl("runs", "launch", "kind=eval", "name=e", f"promptset_version_id={promptset_version.pk}",
                      "preset=cpu-smoke", "eval_samples=99")
    assert too_many.returncode != 0 and "eval_samples" in too_many.stderr
    launched = leanrl("runs", "launch", "kind=eval", "name=terminal eval",
                      f"promptset_version_id={promptset_version.pk}", "preset=cpu-smoke", "eval_samples=2",
                      "error_correction=false")
    assert launched.returncode == 0, launched.stderr
    run = Run.objects.get(pk=int(launched.stdout.split()[1]))
    assert run.kind == "eval" and run.resolved_config.schedule.eval_samples == 2
    assert run.resolved_config.schedule.eval_error_correction is False
