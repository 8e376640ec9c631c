"""A run that overrides one of TrainingRun's methods accepts every argument the driver passes to it: a keyword
added to the base (``_score_all(..., step=)``) and missed by an override fails only when that path runs
(a data-parallel run's evaluation, an evaluation run), which here means at import time of this test."""

import inspect

from trainer.loop.distributed import DataParallelRun
from trainer.loop.driver import TrainingRun
from trainer.loop.evaluation_run import EvaluationRun


def parameters_missing(override, base) -> list[str]:
    accepts = inspect.signature(override).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepts.values()):
        return []
    return [name for name, parameter in inspect.signature(base).parameters.items()
            if parameter.kind is not inspect.Parameter.VAR_POSITIONAL and name not in accepts]


def test_every_overridden_method_of_a_run_accepts_the_base_methods_parameters():
    missing = []
    for run_class in (DataParallelRun, EvaluationRun):
        for name, member in vars(run_class).items():
            base = getattr(TrainingRun, name, None)
            if callable(member) and callable(base) and not name.startswith("__"):
                missing += [f"{run_class.__name__}.{name} lacks {parameter!r}"
                            for parameter in parameters_missing(member, base)]
    assert not missing, "overrides that would fail when the driver calls them:\n" + "\n".join(missing)
