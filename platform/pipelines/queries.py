"""What the pipeline page and the API show, computed once here so that the two always agree."""

from __future__ import annotations

from pipelines.models import RUN_OF_STAGE, STAGE_ORDER, Pipeline, Stage

NOT_MEASURED = "not measured"


def iteration_table(pipeline: Pipeline) -> list[dict]:
    """One row per iteration: proofs harvested, corpus size, problems still unsolved, benchmark pass@k, and the plateau
    rule's verdict. A figure not known yet is None (the page says "not measured" or "—"), never 0."""
    rows = []
    previous_solved = None
    for iteration in pipeline.iterations.order_by("number").select_related("corpus"):
        gain = (None if iteration.benchmark_solved is None or previous_solved is None
                else iteration.benchmark_solved - previous_solved)
        rows.append({
            "number": iteration.number,
            "stage": iteration.stage,
            "stage_label": Stage(iteration.stage).label,
            "proofs_harvested": iteration.proofs_harvested,
            "corpus_size": iteration.corpus.proof_count if iteration.corpus else None,
            "corpus_refused": iteration.corpus.refused_count if iteration.corpus else None,
            "problems_unsolved": iteration.problems_unsolved,
            "benchmark_solved": iteration.benchmark_solved,
            "benchmark_problems": iteration.benchmark_problems,
            "benchmark_k": iteration.benchmark_k,
            "benchmark_pass_at_k": iteration.benchmark_pass_rate,
            "benchmark_gain": gain,
            "plateau_verdict": iteration.plateau_verdict,
        })
        previous_solved = iteration.benchmark_solved
    return rows


def stages_of(pipeline: Pipeline) -> list[dict]:
    """The current iteration's stages, each with its run (if launched) and whether it is done, running or to come."""
    iteration = pipeline.current_iteration
    if iteration is None:
        return []
    current = STAGE_ORDER.index(Stage(iteration.stage))
    stages = []
    for index, stage in enumerate(STAGE_ORDER[:-1]):
        run = iteration.run_of(stage) if stage in RUN_OF_STAGE else None
        status = "done" if index < current else ("current" if index == current else "to come")
        stages.append({"stage": stage.value, "label": stage.label, "status": status,
                       "run": {"id": run.pk, "state": run.state, "url": run.get_absolute_url(), "name": run.name}
                       if run else None})
    return stages
