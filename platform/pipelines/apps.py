from django.apps import AppConfig


class PipelinesConfig(AppConfig):
    name = "pipelines"

    def ready(self):
        # Runs sit below pipelines and never import them: a run's ending and the sweeper's pass are announced
        # (runs/signals.py), and a pipeline whose stage that was moves on (pipelines/advance.py).
        from pipelines import advance
        from runs import signals

        signals.state_changed.connect(advance.advance_when_a_stage_ends, dispatch_uid="advance_pipeline_on_run_end")
        signals.sweep_passed.connect(advance.advance_every_running_pipeline, dispatch_uid="advance_pipelines_on_sweep")
