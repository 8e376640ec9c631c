"""Code that runs inside vLLM's worker processes, named to vLLM by its qualified name.

vLLM builds each worker class with ``worker_extension_cls`` mixed in, so ``collective_rpc``
can call these methods by name. That is how verl and vLLM's own RLHF examples reach the
workers: sending a Python function instead would need vLLM's insecure (pickle)
serialization turned on, since a multi-process engine otherwise refuses callables.

A push arrives in buckets, one ``collective_rpc`` each, inside one in-place reload that spans them
all (``begin_learner_weights`` … ``finish_learner_weights``). One reload per bucket would corrupt
the model: vLLM's layerwise reload (vllm/model_executor/model_loader/reload/layerwise.py) rebuilds
each layer on fresh, uninitialised memory and loads it once all of its elements have arrived, and a
reload that ends with a layer half-loaded (a fused ``qkv_proj`` whose ``v_proj`` is in the next
bucket) processes it anyway and copies the uninitialised rest over the layer's real weights.
The three methods are ``Worker.reload_weights`` (vllm/model_executor/model_loader/reload/inplace.py
``reload_weights``, checkpoint format) cut where the buckets arrive.

Tensors travel as raw bytes: when vLLM's engine core runs in a process of its own, the arguments of
``collective_rpc`` are decoded without types, and a tensor arrives as its encoding (an index into
buffers already dropped, or a memoryview the executor then fails to pickle), never as a tensor.

This module must not import vLLM at import time: the trainer names it on machines without
vLLM too (the tests' stand-in engine resolves the same name).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator

import torch

EXTENSION_CLASS = "trainer.rollout.vllm_worker.LearnerWeightsReceiver"

# (checkpoint name, dtype name, shape, the tensor's bytes)
EncodedWeight = tuple[str, str, list[int], bytes]


def encoded_weights(weights: Iterable[tuple[str, torch.Tensor]]) -> list[EncodedWeight]:
    """Tensors as plain values that survive vLLM's untyped RPC arguments (see the module's docstring)."""
    encoded = []
    for name, tensor in weights:
        tensor = tensor.detach().to("cpu").contiguous()
        dtype = str(tensor.dtype).removeprefix("torch.")
        # Through uint8, as numpy has no bfloat16.
        encoded.append((name, dtype, list(tensor.shape), tensor.reshape(-1).view(torch.uint8).numpy().tobytes()))
    return encoded


def decoded_weights(encoded: Iterable[EncodedWeight]) -> Iterator[tuple[str, torch.Tensor]]:
    for name, dtype, shape, data in encoded:
        with warnings.catch_warnings():
            # A read-only buffer: the weight loaders only copy from it.
            warnings.filterwarnings("ignore", message="The given buffer is not writable")
            flat = torch.frombuffer(data, dtype=torch.uint8) if len(data) else torch.empty(0, dtype=torch.uint8)
        yield name, flat.view(getattr(torch, dtype)).reshape(shape)


def reprocess_tied_output_layers(model: torch.nn.Module) -> int:
    """Repack an output layer that shares its weight with the input embedding, after a reload; returns how many.

    vLLM's reload processes a layer only when it is given weights (its reload package's "Limitations": a tied
    parameter reflects the processing of one parent layer only). A tied ``lm_head`` is never given any (the model's
    ``load_weights`` skips it), and on CPU its processing is a repack for the CPU's matrix kernels
    (``UnquantizedEmbeddingMethod`` → ``dispatch_cpu_unquantized_gemm``): without this the new embedding would be
    read in, and the output layer would go on computing logits from the packed copy of the first weights.
    Elsewhere that processing does nothing, so this is harmless there.
    """
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    owners: dict[int, list[torch.nn.Module]] = {}
    for module in model.modules():
        weight = module._parameters.get("weight")
        if weight is not None:
            owners.setdefault(id(weight), []).append(module)
    reprocessed = 0
    for modules in owners.values():
        if len(modules) < 2:
            continue
        for module in modules:
            if isinstance(getattr(module, "quant_method", None), UnquantizedEmbeddingMethod):
                module.quant_method.process_weights_after_loading(module)
                reprocessed += 1
    return reprocessed


class LearnerWeightsReceiver:
    """Mixed into each vLLM worker: loads the learner's weights by checkpoint name, every rank keeping its own
    tensor-parallel shard (the model's own ``load_weights`` decides)."""

    def begin_learner_weights(self) -> None:
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        with set_current_vllm_config(self.vllm_config):
            initialize_layerwise_reload(self.model_runner.get_model())

    def load_learner_weights(self, bucket: list[EncodedWeight]) -> int:
        from vllm.config import set_current_vllm_config

        with set_current_vllm_config(self.vllm_config):
            self.model_runner.get_model().load_weights(decoded_weights(bucket))
        return len(bucket)

    def finish_learner_weights(self) -> None:
        """Processes what is left (attention layers wait for the end) and puts every layer back on its own memory;
        also after a failed bucket, so the model is never left on vLLM's meta tensors."""
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        with set_current_vllm_config(self.vllm_config):
            finalize_layerwise_reload(self.model_runner.get_model(), self.vllm_config.model_config)
        self.refresh_tied_output_layers()
        # What the model runner's own reload_weights clears after loading: state computed from the old weights.
        for reset in ("reset_lora_state", "reset_encoder_cache", "reset_mm_cache"):
            method = getattr(self.model_runner, reset, None)
            if callable(method):
                method()

    def refresh_tied_output_layers(self) -> int:
        """After every reload, this one or ``Worker.reload_weights`` (see ``reprocess_tied_output_layers``)."""
        from vllm.config import set_current_vllm_config

        with set_current_vllm_config(self.vllm_config):
            return reprocess_tied_output_layers(self.model_runner.get_model())
