"""Proof attempts made in a test as the ingester stores them: the row, then its problem's history
(proofs/history.py), which counts only what the ingester hands it.

``is_standin_verdict`` is the answer's verifier, which the ingester sets on every row, verdict or none
(proofs/run_rollouts.py): False (the default) is real Lean's, whether or not the row has a verdict."""


def stored_attempt(**fields):
    from proofs import history
    from proofs.models import ProofAttempt

    attempt = ProofAttempt.objects.create(**fields)
    history.record_new_attempts([attempt])
    return attempt
