from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self):
        from django.core.signals import request_finished

        from config.logs import forget_the_request_run

        request_finished.connect(forget_the_request_run, dispatch_uid="forget_the_request_run")
