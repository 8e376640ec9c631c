from django.apps import AppConfig


class ProofsConfig(AppConfig):
    name = "proofs"

    def ready(self):
        # The promptsets app asks for its problems' results (promptsets/results.py) and the runs app hands
        # over and shows its rollouts (runs/rollouts.py); this app answers both. Provided here, never
        # imported there: promptsets ← runs ← proofs.
        from promptsets import results
        from proofs import history, run_rollouts
        from runs import rollouts

        results.provide(history)
        rollouts.provide(run_rollouts)
