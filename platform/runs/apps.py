from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self):
        from django.core.signals import request_finished

        from config.logs import forget_the_request_run

        request_finished.connect(forget_the_request_run, dispatch_uid="forget_the_request_run")

        # The lower modules announce, the higher ones act (runs/signals.py): imports flow one way.
        from runs import actions, scheduling, signals

        signals.state_changed.connect(scheduling.schedule_when_a_slot_changes, dispatch_uid="schedule_on_state_change")
        signals.run_admitted.connect(actions.dispatch_admitted, dispatch_uid="dispatch_admitted_runs")
        signals.infrastructure_retry_scheduled.connect(actions.schedule_infrastructure_retry,
                                                       dispatch_uid="schedule_infrastructure_retries")
