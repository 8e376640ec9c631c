"""Every HTTP route of the platform, generated from the URL conf and the ninja router.

A route added anywhere shows up here by itself; a route whose parameters this module cannot fill
fails the walk with a message saying to add them, so no route can be forgotten by the attack suite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver

# Routes outside the per-user rule, and why (each is guarded, or open, on purpose).
PUBLIC = {
    "": "redirects to the runs list, which asks for a login",
    "login/": "the login form",
    "logout/": "logging out",
    "healthz": "the load balancer's health check; it says only whether the services answer",
    "api/": "django-ninja's root: nothing there, 404 for everyone",
    "readyz": "the orchestrator's readiness check: which dependencies answer, nothing of anyone's",
    "readyz/<str:dependency>": "the readiness of one dependency",
    "metrics": "Prometheus: its own guard (METRICS_TOKEN, or a staff login), tested in tests/observability",
    "docs/": "the docs site built from docs/ (MkDocs): the repository's own pages, nothing of anyone's",
    "docs/<path:path>": "a page or asset of the docs site, read only under settings.DOCS_SITE_DIR",
}
# Parameters by (URL namespace, name): each fills the route with one of alice's private things.
PARAMETERS = {
    ("accounts", "pk"): lambda w: w["token"].pk,
    ("promptsets", "pk"): lambda w: w["promptset"].pk,
    ("promptsets", "number"): lambda w: w["version"].number,
    ("promptsets", "problem_pk"): lambda w: w["problem"].pk,
    ("promptsets", "upload_pk"): lambda w: w["upload"].pk,
    ("promptsets", "file_format"): lambda w: "jsonl",
    ("runs", "pk"): lambda w: w["run"].pk,
    ("runs", "step"): lambda w: w["checkpoint"].step,
    ("runs", "part"): lambda w: "model",
    ("runs", "rollout_key"): lambda w: w["attempt"].rollout_key,
    ("proofs", "pk"): lambda w: w["attempt"].pk,
    ("benchmarks", "pk"): lambda w: w["benchmark"].pk,
    ("api", "promptset_id"): lambda w: w["promptset"].pk,
    ("api", "number"): lambda w: w["version"].number,
    ("api", "run_id"): lambda w: w["run"].pk,
    ("api", "attempt_id"): lambda w: w["attempt"].pk,
    ("api", "problem_id"): lambda w: w["problem"].pk,
    ("api", "upload_id"): lambda w: w["upload"].pk,
    ("api", "file_format"): lambda w: "jsonl",
    ("api", "step"): lambda w: w["checkpoint"].step,
    ("api", "part"): lambda w: "model",
    ("api", "group_id"): lambda w: w["group"].pk,
    ("api", "pipeline_id"): lambda w: w["pipeline"].pk,
    ("api", "checkpoint_id"): lambda w: w["checkpoint"].pk,
    ("pipelines", "pk"): lambda w: w["pipeline"].pk,
}
# Where one name means two things in one namespace, the path segment before it says which:
# (namespace, segment, name), e.g. runs/groups/<pk>/ is a group's, runs/<pk>/ a run's.
PARAMETERS_AFTER_SEGMENT = {
    ("runs", "groups", "pk"): lambda w: w["group"].pk,
    ("pipelines", "checkpoints", "pk"): lambda w: w["checkpoint"].pk,
}
_PARAMETER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")


@dataclass(frozen=True)
class Route:
    pattern: str  # as the URL conf spells it, e.g. "runs/<int:pk>/"
    namespace: str  # "runs", "api", … ("" for the project's own)
    methods: tuple[str, ...]

    @property
    def is_api(self) -> bool:
        return self.namespace == "api"

    @property
    def names_an_object(self) -> bool:
        return bool(_PARAMETER.search(self.pattern))

    def url(self, world) -> str:
        def fill(match):
            segment = self.pattern[:match.start()].rstrip("/").rpartition("/")[2]
            specific = (self.namespace, segment, match["name"])
            if specific in PARAMETERS_AFTER_SEGMENT:
                return str(PARAMETERS_AFTER_SEGMENT[specific](world))
            key = (self.namespace, match["name"])
            if key not in PARAMETERS:
                raise AssertionError(f"the route {self.pattern!r} has a parameter {match['name']!r} the attack suite "
                                     f"cannot fill: add {key!r} to PARAMETERS in tests/security/routes.py")
            return str(PARAMETERS[key](world))

        return "/" + _PARAMETER.sub(fill, self.pattern)


def _walk(patterns, prefix="", namespace=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), entry.namespace or namespace)
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), namespace


def _api_methods() -> dict[str, tuple[str, ...]]:
    """URL-conf pattern of each API path → its HTTP methods, from the ninja API's own schema."""
    from config.api import api

    methods = {}
    for path, operations in api.get_openapi_schema()["paths"].items():
        pattern = re.sub(r"\{(\w+)\}", r"<\1>", path).lstrip("/")
        methods[pattern] = tuple(sorted(method.upper() for method in operations))
    return methods


def all_routes() -> list[Route]:
    api_methods = _api_methods()
    routes = []
    seen = set()
    for pattern, namespace in _walk(get_resolver().url_patterns):
        if pattern.startswith("admin/") or pattern in seen:
            continue  # the admin is walked through its registered models (test_the_admin_is_for_staff_only)
        seen.add(pattern)
        if namespace.startswith("api-"):
            if pattern in ("api/", "api/openapi.json", "api/docs"):
                routes.append(Route(pattern, "", ("GET",)))
                continue
            assert pattern in api_methods, f"API route {pattern!r} is missing from the OpenAPI schema"
            routes.append(Route(pattern, "api", api_methods[pattern]))
        else:
            routes.append(Route(pattern, namespace, ("GET", "POST")))
    return routes


def private_routes() -> list[Route]:
    return [route for route in all_routes() if route.pattern not in PUBLIC]
