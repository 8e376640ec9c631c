from django.apps import AppConfig


class PromptsetsConfig(AppConfig):
    name = "promptsets"
