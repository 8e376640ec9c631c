"""A pipeline's proof corpus: each version is the previous one plus the proofs an iteration's harvest had accepted.

What it defends against, and where each is tested:
- **a proof that is not one**: only answers with reward 1 (valid format, Lean accepted, no sorry) count; a
  censored answer (verifier outage, stand-in "cannot decide") has no reward and is never a proof;
- **stand-in verdicts passed off as Lean's**: a pipeline's verifier is fixed by its first harvest
  (``Pipeline.verified_by``): a real-Lean pipeline never counts a stand-in-accepted answer, and a stand-in
  pipeline (the only kind a machine without Lean can run) is labelled so on every page and in every corpus
  row, and fails rather than mix in real verdicts later
  (tests/pipelines/test_a_pipeline_never_mixes_standin_and_lean_verdicts.py);
- **benchmark contamination**: a proof of a statement the held-out benchmark holds is refused, even under another
  theorem name (tests/pipelines/test_a_benchmark_statement_planted_in_the_training_promptset_is_refused.py);
- **duplicates**: the same proof text (whitespace-normalised) of the same statement is kept once.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from django.db import transaction

from pipelines.models import CorpusProof, Iteration, Pipeline, ProofCorpus
from promptsets.models import PromptsetVersion
from promptsets.results import LEAN, STANDIN
from proofs.models import ProofAttempt
from runs.models import Run

# The declared name of a theorem or lemma: a renamed copy of a benchmark statement is still the benchmark's problem.
_DECLARATION_NAME = re.compile(r"^(\s*(?:theorem|lemma|example))\s+[^\s:({\[]+", re.MULTILINE)


class CorpusRefused(ValueError):
    """The harvest cannot become a corpus version as asked; the message says why and what to do."""


def contamination_key(formal_statement: str) -> str:
    """The statement with its theorem's name and whitespace layout ignored: what the contamination guard compares."""
    anonymous = _DECLARATION_NAME.sub(r"\1 _", formal_statement, count=1)
    return hashlib.sha256(" ".join(anonymous.split()).encode()).hexdigest()


def proof_hash(lean_code: str) -> str:
    return hashlib.sha256(" ".join(lean_code.split()).encode()).hexdigest()


def benchmark_keys(version: PromptsetVersion) -> set[str]:
    return {contamination_key(statement) for statement in version.problems.values_list("formal_statement", flat=True)}


def verifier_of_harvest(run: Run) -> str | None:
    """Whose verdicts the harvest's scored answers carry: "lean" where any is real Lean's, "stand-in" where all are
    the stand-in's, None where nothing was scored. An answer that failed the format check never reached a verifier
    (no verdict, and no stand-in label): it says nothing of whose verdicts these are."""
    scored = ProofAttempt.objects.filter(run=run, reward__isnull=False).exclude(verdict="")
    if scored.filter(is_standin_verdict=False).exists():
        return LEAN
    if scored.filter(is_standin_verdict=True).exists():
        return STANDIN
    return None


def accepted_proofs(run: Run, verified_by: str):
    """The harvest's answers that count as proofs for a pipeline verified by ``verified_by``."""
    return (ProofAttempt.objects.filter(run=run, reward__gte=1, is_censored=False,
                                        is_standin_verdict=verified_by == STANDIN)
            .select_related("problem").order_by("pk"))


def demonstration_row(attempt: ProofAttempt, verified_by: str) -> dict:
    """The demonstrations row (trainer/sft/training.py's ``formal_statement`` + ``response`` shape): the release's
    answer (its think block and lean4 block) to the first-attempt prompt, with where it came from."""
    problem = attempt.problem
    return {
        "problem_id": attempt.problem_key,
        "formal_statement": problem.formal_statement if problem else attempt.formal_statement,
        "informal_statement": problem.informal_statement if problem else "",
        "header": problem.header if problem else None,
        "response": attempt.response,
        "proof_attempt_id": attempt.pk,
        "run_id": attempt.run_id,
        "verified_by": verified_by,
    }


def build_corpus(iteration: Iteration) -> ProofCorpus:
    """The iteration's corpus version, from its harvest; also fixes the pipeline's verifier on the first harvest."""
    pipeline: Pipeline = iteration.pipeline
    harvest = iteration.harvest_run
    harvest_verifier = verifier_of_harvest(harvest)
    verified_by = pipeline.verified_by or harvest_verifier or LEAN
    if pipeline.verified_by == STANDIN and harvest_verifier == LEAN:
        raise CorpusRefused(
            f"harvest run {harvest.pk} was judged by real Lean, but this pipeline's corpus holds stand-in verdicts: "
            "a corpus never mixes the two; start a new pipeline against the real Lean server")
    parent = pipeline.corpora.filter(number__lt=iteration.number).order_by("-number").first()
    refused_keys = benchmark_keys(pipeline.benchmark_version)
    known = set(parent.proofs.values_list("statement_hash", "proof_hash")) if parent else set()
    new_rows, refused, duplicates, harvested = [], [], 0, 0
    for attempt in accepted_proofs(harvest, verified_by):
        harvested += 1
        row = demonstration_row(attempt, verified_by)
        statement_key = contamination_key(row["formal_statement"])
        if statement_key in refused_keys:
            refused.append(attempt.problem_key)
            continue
        key = (statement_key, proof_hash(attempt.lean_code or attempt.response))
        if key in known:
            duplicates += 1
            continue
        known.add(key)
        new_rows.append(CorpusProof(proof_attempt=attempt, problem_key=attempt.problem_key, statement_hash=key[0],
                                    proof_hash=key[1], row=row))
    with transaction.atomic():
        if not pipeline.verified_by:
            Pipeline.objects.filter(pk=pipeline.pk).update(verified_by=verified_by)
            pipeline.verified_by = verified_by
        corpus = ProofCorpus.objects.create(
            pipeline=pipeline, number=iteration.number, parent=parent, harvest_run=harvest, verified_by=verified_by,
            added_count=len(new_rows), duplicate_count=duplicates, refused_count=len(refused),
            refused_keys=sorted(set(refused)), path=str(pipeline.artifacts_dir / f"corpus-v{iteration.number}.jsonl"))
        inherited = [CorpusProof(corpus=corpus, proof_attempt_id=proof.proof_attempt_id, problem_key=proof.problem_key,
                                 statement_hash=proof.statement_hash, proof_hash=proof.proof_hash, row=proof.row)
                     for proof in (parent.proofs.all() if parent else [])]
        for proof in new_rows:
            proof.corpus = corpus
        CorpusProof.objects.bulk_create(inherited + new_rows)
        corpus.proof_count = len(inherited) + len(new_rows)
        corpus.save(update_fields=["proof_count"])
        solved = {proof.statement_hash for proof in inherited + new_rows}
        training = pipeline.training_version.problems.values_list("formal_statement", flat=True)
        Iteration.objects.filter(pk=iteration.pk).update(
            corpus=corpus, proofs_harvested=harvested,
            problems_unsolved=sum(1 for statement in training if contamination_key(statement) not in solved))
    write_corpus_file(corpus)
    return corpus


def write_corpus_file(corpus: ProofCorpus) -> None:
    """The corpus as the SFT run reads it; written whole, then moved into place (never half a file)."""
    path = Path(corpus.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".jsonl.partial")
    with partial.open("w", encoding="utf-8") as out:
        for proof in corpus.proofs.order_by("pk"):
            out.write(json.dumps(proof.row, ensure_ascii=False) + "\n")
    partial.replace(path)
