"""A client of the platform's JSON API, driven by the OpenAPI schema the server publishes.

Operations are looked up by their ``operationId`` in ``/api/openapi.json`` (fetched once per
client), so the client follows the server's routes and request bodies instead of copying them:
a field added to the launch contract on the server is a field the CLI can send, and the CLI's
``--help`` for a request body is read from the same schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx


class ApiError(Exception):
    """The server refused a request; ``str()`` is its own explanation, field errors included."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class PlatformClient:
    def __init__(self, server: str, token: str, *, timeout_s: float = 60.0, transport=None):
        self.server = server.rstrip("/")
        self.http = httpx.Client(base_url=self.server, headers={"Authorization": f"Bearer {token}"},
                                 timeout=timeout_s, transport=transport, follow_redirects=False)
        self._schema: dict | None = None

    def close(self) -> None:
        self.http.close()

    # --- the schema ---------------------------------------------------------------------------

    @property
    def schema(self) -> dict:
        if self._schema is None:
            response = self.http.get("/api/openapi.json")
            _raise_for(response, "reading the API schema")
            self._schema = response.json()
        return self._schema

    def operation(self, operation_id: str) -> tuple[str, str, dict]:
        """(HTTP method, path template, operation object) of ``operation_id``."""
        for path, methods in self.schema.get("paths", {}).items():
            for method, spec in methods.items():
                if isinstance(spec, dict) and spec.get("operationId") == operation_id:
                    return method.upper(), path, spec
        known = sorted(spec.get("operationId", "") for methods in self.schema.get("paths", {}).values()
                       for spec in methods.values() if isinstance(spec, dict))
        raise ApiError(0, f"the server has no operation {operation_id!r} (this client may be newer than the "
                          f"server); it offers: {', '.join(known)}")

    def body_fields(self, operation_id: str) -> dict[str, dict]:
        """The JSON request body's top-level fields of an operation: name → its schema, every ``$ref`` in it
        replaced by what it names, and ``required``."""
        _, _, spec = self.operation(operation_id)
        content = spec.get("requestBody", {}).get("content", {})
        body = self._inline(content.get("application/json", {}).get("schema", {}))
        required = set(body.get("required", []))
        return {name: {**field, "required": name in required} for name, field in body.get("properties", {}).items()}

    def _inline(self, schema: Any, local: dict | None = None, following: tuple[str, ...] = ()) -> Any:
        """``schema`` with each ``$ref`` replaced by its target: ``#/components/…`` in the document, ``#/$defs/…``
        in the nearest enclosing schema that has ``$defs`` (pydantic puts an enumeration's definition there,
        inside the request body). A reference to itself is left as it is."""
        if isinstance(schema, list):
            return [self._inline(item, local, following) for item in schema]
        if not isinstance(schema, dict):
            return schema
        if "$defs" in schema:
            local = schema
        reference = schema.get("$ref")
        if isinstance(reference, str) and reference not in following:
            parts = reference.removeprefix("#/").split("/")
            target = local if parts[0] == "$defs" and local is not None else self.schema
            for part in parts:
                target = target[part]
            beside = {key: value for key, value in schema.items() if key != "$ref"}
            return self._inline({**target, **beside}, local, (*following, reference))
        return {key: self._inline(value, local, following) for key, value in schema.items() if key != "$defs"}

    # --- calls --------------------------------------------------------------------------------

    def call(self, operation_id: str, *, path: dict[str, Any] | None = None, params: dict | None = None,
             json_body: Any = None, data: dict | None = None, files: dict | None = None) -> Any:
        response = self._send(operation_id, path=path, params=params, json_body=json_body, data=data, files=files)
        _raise_for(response, operation_id)
        return response.json() if response.content else None

    def download(self, operation_id: str, destination, *, path: dict[str, Any]) -> Iterator[int]:
        """Stream a file to ``destination`` (an open binary file); yields the bytes written so far."""
        method, template, _ = self.operation(operation_id)
        with self.http.stream(method, template.format(**(path or {}))) as response:
            if response.status_code >= 400:
                response.read()
                _raise_for(response, operation_id)
            written = 0
            for chunk in response.iter_bytes():
                destination.write(chunk)
                written += len(chunk)
                yield written

    def _send(self, operation_id, *, path, params, json_body, data, files) -> httpx.Response:
        method, template, _ = self.operation(operation_id)
        url = template.format(**(path or {}))
        if files is not None or data is not None:
            return self.http.request(method, url, params=params, data=data, files=files)
        return self.http.request(method, url, params=params, json=json_body)


def _raise_for(response: httpx.Response, what: str) -> None:
    if response.status_code < 400:
        return
    if response.status_code == 401:
        raise ApiError(401, f"{what}: the server refused the token (401); run `leanrl login` with a valid token")
    try:
        body = response.json()
    except json.JSONDecodeError:
        raise ApiError(response.status_code, f"{what}: HTTP {response.status_code}: {response.text[:300]}") from None
    raise ApiError(response.status_code, f"{what}: {describe_error(body, response.status_code)}")


def describe_error(body: Any, status: int) -> str:
    """The server's words for a refusal: its detail, and each field's errors as 'field: message'."""
    if not isinstance(body, dict):
        return f"HTTP {status}: {body}"
    parts = []
    detail = body.get("detail")
    if isinstance(detail, str):
        parts.append(detail)
    elif isinstance(detail, list):  # django-ninja's validation errors
        for error in detail:
            location = ".".join(str(part) for part in error.get("loc", []) if part not in ("body", "data"))
            parts.append(f"{location}: {error.get('msg', error)}")
    for field, messages in (body.get("field_errors") or {}).items():
        parts.append(f"{field}: {'; '.join(messages) if isinstance(messages, list) else messages}")
    for key in ("rejected", "errors"):
        if isinstance(body.get(key), list):
            parts.extend(str(item) for item in body[key][:10])
    return "; ".join(parts) or f"HTTP {status}: {json.dumps(body)[:300]}"
