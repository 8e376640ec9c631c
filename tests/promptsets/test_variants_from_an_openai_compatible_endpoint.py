"""Variants come from an OpenAI-compatible endpoint; only the reply's lean4 blocks are read, as text."""

import json

import httpx
import pytest

from promptsets.variants import VariantsEndpoint, VariantsUnavailable, extract_statements, request_variants

ENDPOINT = VariantsEndpoint(base_url="http://variants.test/v1", model="tiny", api_key="k")


def standin_endpoint(reply_text: str, seen: list):
    """A stand-in for an OpenAI-compatible server, answering one fixed chat completion."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": reply_text}}]})

    return httpx.MockTransport(handle)


def test_it_asks_chat_completions_and_returns_each_lean_block():
    seen = []
    reply = "Here:\n```lean4\ntheorem v1 : 2 + 3 = 5 := by\n```\nand\n```lean\ntheorem v2 : 3 + 3 = 6 := by\n```"
    statements = request_variants(ENDPOINT, "theorem t : 1 + 1 = 2 := by", "1+1", 2,
                                  transport=standin_endpoint(reply, seen))
    assert statements == ["theorem v1 : 2 + 3 = 5 := by", "theorem v2 : 3 + 3 = 6 := by"]
    (request,) = seen
    assert str(request.url) == "http://variants.test/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer k"
    body = json.loads(request.content)
    assert body["model"] == "tiny" and "theorem t : 1 + 1 = 2 := by" in body["messages"][0]["content"]


def test_an_endpoint_that_is_down_or_not_openai_compatible_is_reported_not_crashed():
    down = httpx.MockTransport(lambda request: httpx.Response(503))
    with pytest.raises(VariantsUnavailable, match="did not answer"):
        request_variants(ENDPOINT, "theorem t : True := by", "", 1, transport=down)
    odd = httpx.MockTransport(lambda request: httpx.Response(200, json={"answer": "hi"}))
    with pytest.raises(VariantsUnavailable, match="OpenAI-compatible"):
        request_variants(ENDPOINT, "theorem t : True := by", "", 1, transport=odd)


def test_text_outside_lean_blocks_is_ignored():
    assert extract_statements("no code here, just `theorem x : True := by`") == []
