"""kimina-client 0.2.1 does not import on Python 3.11 without our shim (trainer/verification/kimina_compat.py)."""

import subprocess
import sys

import pytest


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the bug only bites below Python 3.12")
def test_the_released_kimina_client_still_needs_the_typeddict_workaround():
    plain_import = subprocess.run([sys.executable, "-c", "import kimina_client"], capture_output=True, text=True)
    assert plain_import.returncode != 0, (
        "kimina_client now imports without the workaround: delete trainer/verification/kimina_compat.py's "
        "typing patch and import kimina_client directly"
    )
    assert "typing_extensions.TypedDict" in plain_import.stderr


def test_the_workaround_gives_working_models_and_leaves_typing_untouched():
    import typing

    before = typing.TypedDict
    from trainer.verification.kimina_compat import CheckResponse

    assert typing.TypedDict is before
    parsed = CheckResponse.model_validate(
        {"results": [{"id": "a", "time": 0.1, "response": {"messages": [
            {"severity": "error", "pos": {"line": 1, "column": 2}, "endPos": None, "data": "boom"}]}}]}
    )
    assert parsed.results[0].analyze().status.value == "lean_error"
