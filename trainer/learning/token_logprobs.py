"""Log-probabilities of response tokens, never the whole (tokens × vocabulary) tensor.

The model runs its own forward pass; its output projection is replaced for the call by
``ChunkedTokenLogprobs``, which computes the tokens' log-probs from the final hidden states chunk
by chunk, forward and backward. Equal, values and gradients, to the full-vocabulary reference
(``full_vocabulary_response_logprobs``, kept for tests and benchmarks only).
"""

from __future__ import annotations

import torch

from trainer.learning.batching import TokenBatch

# Models that transform the logits after the output projection (soft-capping, scaling): the
# log-probs below take the projection's output as the logits, so these would be scored wrongly.
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def check_model_supports_chunked_logprobs(model) -> None:
    """Fail at start-up for a model whose logits are not just its output projection's."""
    config = getattr(model, "config", None)
    transforms = [name for name in _LOGIT_TRANSFORMS if getattr(config, name, None) not in (None, 1, 1.0)]
    if transforms:
        raise ValueError(
            f"{type(model).__name__} transforms its logits after the output projection ({', '.join(transforms)}), "
            "which the learner's chunked log-probabilities do not reproduce; use a model without it (Llama, Qwen2/3)"
        )
    if model.get_output_embeddings() is None:
        raise ValueError(f"{type(model).__name__} has no output projection (get_output_embeddings() is None); use a causal LM")


def _logits_dtype(matmul_dtype: torch.dtype) -> torch.dtype:
    # Softmax arithmetic in float32 at least: bfloat16 logits would round log-probs to 3 digits.
    return torch.promote_types(matmul_dtype, torch.float32)


def _matmul_dtype(hidden: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    # What F.linear would compute in at this point: the autocast dtype inside autocast, else the inputs' own.
    if torch.is_autocast_enabled(hidden.device.type):
        return torch.get_autocast_dtype(hidden.device.type)
    return torch.promote_types(hidden.dtype, weight.dtype)


def _chunked_forward(hidden, weight, bias, labels, temperature: float, chunk_tokens: int, matmul_dtype: torch.dtype,
                     *, with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(N,) log-probs at the labels, (N,) log-normalizers and, when asked, (N,) entropies, chunk by chunk.

    The entropy of softmax(z) is log Z − Σ p·z (z shifted by its max): it needs exp(z) and z at once, so a
    chunk computing it holds a second (c, V) buffer, never a (tokens × vocabulary) one. The log-probs are the
    same operations either way, so asking for the entropy changes no bit of them
    (tests/learning/test_the_learner_computes_entropy_without_changing_its_log_probabilities.py).
    """
    with torch.autocast(hidden.device.type, enabled=False):
        cast_weight = weight.to(matmul_dtype)
        cast_bias = None if bias is None else bias.to(matmul_dtype)
        token_logprobs = torch.empty(hidden.shape[0], dtype=_logits_dtype(matmul_dtype), device=hidden.device)
        log_normalizers = torch.empty_like(token_logprobs)
        entropies = torch.empty_like(token_logprobs) if with_entropy else None
        for start in range(0, hidden.shape[0], chunk_tokens):
            stop = start + chunk_tokens
            logits = ChunkedTokenLogprobs._logits(hidden[start:stop], cast_weight, cast_bias, matmul_dtype, temperature)
            label_logits = logits.gather(-1, labels[start:stop, None]).squeeze(-1)
            maxes = logits.amax(dim=-1)
            if entropies is None:
                # log-sum-exp in place: torch.logsumexp would hold a second (c, V) buffer for exp(logits - max),
                # which the memory plan's fake-tensor tracker does not see.
                log_normalizers[start:stop] = logits.sub_(maxes[:, None]).exp_().sum(dim=-1).log_().add_(maxes)
            else:
                shifted = logits.sub_(maxes[:, None])  # (c, V), in place
                weights = shifted.exp()  # (c, V): the second buffer, only in a no-gradient pass that asks for entropy
                shifted_normalizers = weights.sum(dim=-1).log_()
                log_normalizers[start:stop] = shifted_normalizers + maxes
                entropies[start:stop] = shifted_normalizers - weights.mul_(shifted).sum(dim=-1) / shifted_normalizers.exp()
                del weights, shifted
            token_logprobs[start:stop] = label_logits - log_normalizers[start:stop]
            del logits
    return token_logprobs, log_normalizers, entropies


class ChunkedTokenLogprobs(torch.autograd.Function):
    """log softmax(h·Wᵀ + b) at the label, chunk by chunk: (N, H) hidden states in, (N,) float32 log-probs out.

    The forward keeps only each token's log-sum-exp; the backward recomputes one chunk's
    logits at a time, so no tensor larger than chunk_tokens × vocabulary ever exists, in
    either pass. Logits are float32 (the matrix product itself runs in ``matmul_dtype``,
    bfloat16 under autocast, as the full-vocabulary function's did) and divided by the
    temperature before the softmax. The weight's gradient is summed over chunks in float32
    (or wider, for a float64 model).

    A fused linear-cross-entropy kernel (liger-kernel's, Triton on CUDA) would do the same in
    one kernel, faster; it is not installed in this project (it needs Triton and a GPU, so it
    could not be tested where the suite runs), and the memory bound is already the chunk's.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, temperature: float, chunk_tokens: int, matmul_dtype: torch.dtype):
        token_logprobs, log_normalizers, _ = _chunked_forward(
            hidden, weight, bias, labels, temperature, chunk_tokens, matmul_dtype, with_entropy=False)
        ctx.save_for_backward(hidden, weight, bias, labels, log_normalizers)
        ctx.temperature, ctx.chunk_tokens, ctx.matmul_dtype = temperature, chunk_tokens, matmul_dtype
        return token_logprobs

    @staticmethod
    def _logits(hidden_chunk, cast_weight, cast_bias, matmul_dtype, temperature):
        logits = torch.nn.functional.linear(hidden_chunk.to(matmul_dtype), cast_weight, cast_bias)
        logits = logits.to(_logits_dtype(matmul_dtype))  # (c, V)
        if temperature != 1.0:
            logits = logits / temperature
        return logits

    @staticmethod
    def backward(ctx, grad_output):
        hidden, weight, bias, labels, log_normalizers = ctx.saved_tensors
        temperature, chunk_tokens, matmul_dtype = ctx.temperature, ctx.chunk_tokens, ctx.matmul_dtype
        needs_hidden, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.empty_like(hidden) if needs_hidden else None
        accumulation_dtype = _logits_dtype(matmul_dtype)
        grad_weight = torch.zeros(weight.shape, dtype=accumulation_dtype, device=weight.device) if needs_weight else None
        grad_bias = torch.zeros(bias.shape, dtype=accumulation_dtype, device=bias.device) if needs_bias else None
        with torch.autocast(hidden.device.type, enabled=False):
            cast_weight = weight.to(matmul_dtype)
            cast_bias = None if bias is None else bias.to(matmul_dtype)
            for start in range(0, hidden.shape[0], chunk_tokens):
                stop = start + chunk_tokens
                hidden_chunk = hidden[start:stop].to(matmul_dtype)
                grad_chunk = grad_output[start:stop, None].to(accumulation_dtype)  # (c, 1)
                logits = ChunkedTokenLogprobs._logits(hidden_chunk, cast_weight, cast_bias, matmul_dtype, temperature)
                # d log p(label) / d logits = onehot(label) - softmax(logits); in place, one (c, V) buffer.
                grad_logits = logits.sub_(log_normalizers[start:stop, None]).exp_().mul_(-grad_chunk)
                grad_logits.scatter_add_(-1, labels[start:stop, None], grad_chunk)
                if temperature != 1.0:
                    grad_logits.div_(temperature)
                grad_logits = grad_logits.to(matmul_dtype)
                if needs_hidden:
                    grad_hidden[start:stop] = (grad_logits @ cast_weight).to(hidden.dtype)
                if needs_weight:
                    grad_weight += grad_logits.t() @ hidden_chunk
                if needs_bias:
                    grad_bias += grad_logits.sum(dim=0)
                del logits, grad_logits
        return (
            grad_hidden,
            None if grad_weight is None else grad_weight.to(weight.dtype),
            None if grad_bias is None else grad_bias.to(bias.dtype),
            None, None, None, None,
        )


def chunked_token_logprobs(hidden, weight, bias, labels, temperature: float, chunk_tokens: int) -> torch.Tensor:
    """(..., H) hidden states and (...) labels to (...) float32 log-probs; see ChunkedTokenLogprobs."""
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be at least 1, got {chunk_tokens}")
    flat = ChunkedTokenLogprobs.apply(
        hidden.reshape(-1, hidden.shape[-1]), weight, bias, labels.reshape(-1),
        float(temperature), int(chunk_tokens), _matmul_dtype(hidden, weight),
    )
    return flat.view(labels.shape)


@torch.no_grad()
def chunked_token_logprobs_and_entropy(hidden, weight, bias, labels, temperature: float,
                                       chunk_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(...) log-probs, bit for bit ``chunked_token_logprobs``'s, and (...) entropies of the (tempered)
    distribution each token was drawn from, in nats; no gradient (the π_old pass's)."""
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be at least 1, got {chunk_tokens}")
    token_logprobs, _, entropies = _chunked_forward(
        hidden.reshape(-1, hidden.shape[-1]), weight, bias, labels.reshape(-1),
        float(temperature), int(chunk_tokens), _matmul_dtype(hidden, weight), with_entropy=True,
    )
    return token_logprobs.view(labels.shape), entropies.view(labels.shape)


DEFAULT_LOGPROB_CHUNK_TOKENS = 1024


def response_logprobs(model, batch: TokenBatch, temperature: float = 1.0,
                      chunk_tokens: int = DEFAULT_LOGPROB_CHUNK_TOKENS, *, with_entropy: bool = False):
    """log π(response token | everything before it), (B, K), in float32 (or the model's wider dtype), in either layout.

    The model runs its own forward (so FSDP gathers and reduces as usual), but its output
    projection is replaced, for this call only, by ``chunked_token_logprobs``: the model
    hands it the hidden states of the predicting columns only (``logits_to_keep``), and
    what comes back as ``logits`` are the tokens' log-probs. Logits are divided by the
    sampling temperature before the softmax, as verl does, so the learner scores tokens
    under the distribution they were sampled from. Equal, values and gradients, to
    ``full_vocabulary_response_logprobs`` (tests/learning/test_chunked_logprobs_*).

    ``with_entropy`` (no gradient): returns (log-probs, entropies), both (B, K); the log-probs are the same bits.
    """
    head = model.get_output_embeddings()
    scale = temperature if temperature > 0 else 1.0
    labels = batch.response_ids
    entropies = []

    def token_logprobs_head(hidden_states):  # (B, K, H) -> (B, K)
        if with_entropy:
            logprobs, entropy = chunked_token_logprobs_and_entropy(
                hidden_states, head.weight, head.bias, labels, scale, chunk_tokens)
            entropies.append(entropy)
            return logprobs
        return chunked_token_logprobs(hidden_states, head.weight, head.bias, labels, scale, chunk_tokens)

    previous_forward = head.__dict__.get("forward")
    head.forward = token_logprobs_head
    try:
        output = model(**batch.model_inputs())
    finally:
        if previous_forward is None:
            del head.forward
        else:
            head.forward = previous_forward
    if with_entropy:
        return output.logits, entropies[0]  # (B, K), (B, K)
    return output.logits  # (B, K)


def full_vocabulary_response_logprobs(model, batch: TokenBatch, temperature: float = 1.0) -> torch.Tensor:
    """The learner's log-probs as they were computed before the chunked path: the reference, never on the path.

    Builds the (B, K, V) logits, a float32 copy and a float32 log-softmax: about 30 + 60 + 60 GB
    at the recipe's 24k tokens and Qwen3's vocabulary. Kept for the tests that pin the chunked
    function to it and for benchmarks/learner_memory.py's baseline.
    """
    output = model(**batch.model_inputs())
    logits = output.logits.to(_logits_dtype(output.logits.dtype))  # (B, K, V), float32 at least
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)  # (B, K)
