"""Variants of a problem from an OpenAI-compatible chat endpoint (off unless configured).

Configured by ``PROMPTSET_VARIANTS_BASE_URL`` (e.g. ``http://vllm:8000/v1``), with
``PROMPTSET_VARIANTS_MODEL`` and ``PROMPTSET_VARIANTS_API_KEY``, from Django settings or the
environment. The reply is untrusted text: only its ```lean4 blocks are read, as plain text,
and each goes through the same validation as an uploaded row (``versions.add_variants``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import httpx
from django.conf import settings

_LEAN_BLOCK = re.compile(r"```lean4?[ \t]*\n(.*?)```", re.DOTALL)
MAX_VARIANTS = 8
REQUEST_TIMEOUT_SECONDS = 60.0


class VariantsUnavailable(RuntimeError):
    """The endpoint is not configured, unreachable or answered something unusable."""


@dataclass(frozen=True)
class VariantsEndpoint:
    base_url: str
    model: str
    api_key: str | None = None

    @classmethod
    def configured(cls) -> VariantsEndpoint | None:
        def setting(name: str) -> str | None:
            return getattr(settings, name, None) or os.environ.get(name) or None

        base_url = setting("PROMPTSET_VARIANTS_BASE_URL")
        if not base_url:
            return None
        return cls(base_url=base_url.rstrip("/"), model=setting("PROMPTSET_VARIANTS_MODEL") or "default",
                   api_key=setting("PROMPTSET_VARIANTS_API_KEY"))


def variants_prompt(formal_statement: str, informal_statement: str, count: int) -> str:
    return (
        f"Write {count} variants of the following Lean 4 theorem: change numbers, hypotheses or the goal so that "
        "each variant is a different but related problem of similar difficulty. Give each variant as a complete "
        "theorem statement ending in ':= by' with no proof, each in its own ```lean4 code block, and nothing else.\n\n"
        + (f"Informal statement: {informal_statement}\n\n" if informal_statement else "")
        + f"```lean4\n{formal_statement}\n```"
    )


def extract_statements(reply: str) -> list[str]:
    return [block.strip() for block in _LEAN_BLOCK.findall(reply) if block.strip()]


def request_variants(endpoint: VariantsEndpoint, formal_statement: str, informal_statement: str, count: int,
                     *, transport: httpx.BaseTransport | None = None) -> list[str]:
    """Statements the endpoint proposed (unvalidated); VariantsUnavailable when it cannot answer."""
    if not 1 <= count <= MAX_VARIANTS:
        raise ValueError(f"count must be from 1 to {MAX_VARIANTS}, got {count}")
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    body = {
        "model": endpoint.model,
        "messages": [{"role": "user", "content": variants_prompt(formal_statement, informal_statement, count)}],
        "temperature": 1.0,
    }
    try:
        with httpx.Client(transport=transport, timeout=REQUEST_TIMEOUT_SECONDS) as client:
            response = client.post(f"{endpoint.base_url}/chat/completions", json=body, headers=headers)
            response.raise_for_status()
            reply = response.json()["choices"][0]["message"]["content"]
    except httpx.HTTPError as error:
        raise VariantsUnavailable(
            f"the variants endpoint {endpoint.base_url} did not answer ({error}): check PROMPTSET_VARIANTS_BASE_URL"
        ) from None
    except (ValueError, KeyError, IndexError, TypeError):
        raise VariantsUnavailable(
            f"the variants endpoint {endpoint.base_url} answered without choices[0].message.content: "
            "is it OpenAI-compatible (/chat/completions)?"
        ) from None
    if not isinstance(reply, str):
        raise VariantsUnavailable("the variants endpoint's message content is not text")
    return extract_statements(reply)[:count]
