"""Lineage: every model (the base, each SFT and RL checkpoint) is a node; the runs and data versions that made it
are its edges. The pipeline page, the checkpoint page and the API all read these functions, so they agree."""

from __future__ import annotations

from django.urls import reverse

from pipelines.advance import model_after
from pipelines.models import Iteration, Pipeline, ProofCorpus
from runs.models import Checkpoint, Run

MAX_DEPTH = 200  # a lineage longer than this is a loop in the data, never a real one


def model_label(checkpoint: Checkpoint | None, pipeline: Pipeline | None = None, run: Run | None = None) -> str:
    if checkpoint is not None:
        return f"checkpoint {checkpoint.pk} ({checkpoint.run.get_kind_display().split(' (')[0]} run {checkpoint.run_id}, " \
               f"step {checkpoint.step})"
    if pipeline is not None and pipeline.model:
        return f"base model {pipeline.model}"
    if run is not None:
        return f"base model {run.resolved_config.model.name_or_path}"
    return f"base model of the {pipeline.preset} preset" if pipeline else "base model"


def _model_url(checkpoint: Checkpoint | None) -> str:
    return reverse("pipelines:checkpoint", args=[checkpoint.pk]) if checkpoint is not None else ""


def _run(run: Run | None) -> dict | None:
    if run is None:
        return None
    return {"id": run.pk, "kind": run.kind, "state": run.state, "name": run.name, "url": run.get_absolute_url()}


def _version(version) -> dict | None:
    if version is None:
        return None
    return {"kind": "promptset version", "id": version.pk,
            "label": f"{version.promptset.name} v{version.number} ({version.problem_count} problems)",
            "url": reverse("promptsets:version", args=[version.promptset_id, version.number])}


def _corpus(corpus: ProofCorpus | None) -> dict | None:
    if corpus is None:
        return None
    return {"kind": "proof corpus", "id": corpus.pk,
            "label": f"proof corpus v{corpus.number} ({corpus.proof_count} proofs, {corpus.get_verified_by_display()})",
            "url": reverse("pipelines:detail", args=[corpus.pipeline_id]) + f"#corpus-{corpus.number}"}


def _last_checkpoint(run: Run | None) -> Checkpoint | None:
    return run.checkpoints.order_by("-step").first() if run is not None else None


def pipeline_edges(pipeline: Pipeline) -> list[dict]:
    """Every edge of the pipeline's lineage, iteration by iteration: from a model, through a run and its data, to what
    it made (a model, a corpus version, a benchmark result)."""
    edges = []
    previous = None
    for iteration in pipeline.iterations.order_by("number").select_related(
            "harvest_run", "sft_run", "rl_run", "benchmark_run", "corpus", "rl_version__promptset"):
        before = model_after(previous, pipeline)
        if iteration.harvest_run:
            edges.append({"iteration": iteration.number, "stage": "harvest", "source": model_label(before, pipeline),
                          "source_url": _model_url(before), "run": _run(iteration.harvest_run),
                          "data": _version(pipeline.training_version),
                          "target": _corpus(iteration.corpus)["label"] if iteration.corpus else "(harvesting)"})
        if iteration.sft_run:
            sft_model = _last_checkpoint(iteration.sft_run)
            start = iteration.sft_run.starting_checkpoint
            edges.append({"iteration": iteration.number, "stage": "sft", "source": model_label(start, pipeline),
                          "source_url": _model_url(start), "run": _run(iteration.sft_run),
                          "data": _corpus(iteration.corpus),
                          "target": model_label(sft_model) if sft_model else "(training)",
                          "target_url": _model_url(sft_model)})
        if iteration.rl_run:
            rl_model = _last_checkpoint(iteration.rl_run)
            start = iteration.rl_run.starting_checkpoint
            edges.append({"iteration": iteration.number, "stage": "rl", "source": model_label(start, pipeline),
                          "source_url": _model_url(start), "run": _run(iteration.rl_run),
                          "data": _version(iteration.rl_version),
                          "target": model_label(rl_model) if rl_model else "(training)",
                          "target_url": _model_url(rl_model)})
        if iteration.benchmark_run:
            start = iteration.benchmark_run.starting_checkpoint
            solved = ("not measured" if iteration.benchmark_solved is None
                      else f"{iteration.benchmark_solved} of {iteration.benchmark_problems} solved (pass@{iteration.benchmark_k})")
            edges.append({"iteration": iteration.number, "stage": "benchmark", "source": model_label(start, pipeline),
                          "source_url": _model_url(start), "run": _run(iteration.benchmark_run),
                          "data": _version(pipeline.benchmark_version), "target": f"benchmark: {solved}"})
        previous = iteration
    return edges


def checkpoint_lineage(checkpoint: Checkpoint) -> list[dict]:
    """The checkpoint's ancestry, newest first: for each model, the run that made it, the data it trained on (the
    proof corpus for a pipeline's SFT, the promptset version otherwise) and the model it started from."""
    chain, node, seen = [], checkpoint, set()
    while node is not None and node.pk not in seen and len(chain) < MAX_DEPTH:
        seen.add(node.pk)
        run = node.run
        iteration = Iteration.objects.filter(sft_run=run).select_related("corpus").first()
        corpus = iteration.corpus if iteration is not None else None
        data = _corpus(corpus) if corpus is not None and run.demonstrations_path else _version(run.promptset_version)
        parent = run.starting_checkpoint
        chain.append({"model": model_label(node), "model_url": _model_url(node), "run": _run(run), "data": data,
                      "pipeline_id": _pipeline_of(run), "source": model_label(parent, run=run),
                      "source_url": _model_url(parent)})
        node = parent
    return chain


def _pipeline_of(run: Run) -> int | None:
    found = Iteration.objects.holding(run).first()
    return found.pipeline_id if found else None
