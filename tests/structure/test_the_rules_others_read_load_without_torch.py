"""The rules other parts read from the trainer load without torch, the driver or the learner: the rank
rules (a vLLM engine and the memory plan read them), the events and their payload models (the
platform's ingester validates with them), the verdicts, the FIELD=VALUE reading (manage.py launch_run uses it)
and the engine factory (it imports each engine only when it builds one)."""

import subprocess
import sys

import pytest

from tests.structure.source_tree import ROOT

LIGHT_MODULES = ["trainer.ranks", "trainer.observability.events", "trainer.verification.verdicts", "trainer.fields",
                 "trainer.recipe.problems", "trainer.sft.warm_start_status", "trainer.rollout.engines",
                 "trainer.observability.gap", "trainer.observability.token_records", "trainer.observability.packed_token_records"]
HEAVY = ["torch", "vllm", "transformers", "ray", "trainer.loop.driver", "trainer.learning.learner", "trainer.loop.distributed"]


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_it_imports_without_the_heavy_libraries_or_the_learner(module):
    probe = f"import sys, {module}; print(' '.join(name for name in {HEAVY!r} if name in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [], f"importing {module} loaded {result.stdout.strip()}"
