"""Check a GPU machine end to end in one go: vLLM rollouts, a learner step, the weight push.

Run it on one H100/H200 with vLLM installed:

    python deploy/gpu_check.py                      # a tiny random Llama built here, no download
    python deploy/gpu_check.py --model /models/Kimina-Prover-Distill-1.7B   # any Hugging Face folder

What it does, in order, printing as it goes:

1. vLLM loads the policy (colocated with the learner, sleep mode on) and samples n answers
   per prompt; generated tokens per second are printed.
2. A learner step on the GPU with the project's Dr.GRPO ``Learner``. There is no Lean here,
   so the rewards are synthetic and labelled so: even-numbered samples score 1, odd ones 0,
   which gives every group non-zero advantages. The learning rate is raised for this check
   (``--learning-rate``) so that one step visibly moves a random model.
3. The new weights are pushed into vLLM. The next greedy answer must differ from the one
   before the step, and vLLM's log-probabilities of a fixed text must have moved to the
   learner's (closer after the push than before it).
4. ``--steps`` steps shaped like the ``h100x8`` preset scaled to one GPU (256/8 = 32 prompts
   of 8 samples, mini-batches of 4 prompts: the recipe's 8 optimizer steps per batch), with
   the time split into generation, learning and weight sync.

It exits 2 with the reason when there is no CUDA GPU or no vLLM, and 1 when a check fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GPUS_IN_PRESET = 8
PROBE_PROMPT = "theorem two_plus_two : 2 + 2 = 4 := by"
FIXED_CONTINUATION = " norm_num\n\ntheorem add_comm' (a b : ℕ) : a + b = b + a := by\n  omega"
STATEMENTS = [
    "theorem mathd_algebra_10 : abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10",
    "theorem amc12a_2002_p6 (n : ℕ) (h₀ : 0 < n) : ∃ m, m > n ∧ ∃ p, m * p ≤ m + p",
    "theorem mathd_numbertheory_5 (n : ℕ) (h₀ : 10 ≤ n) (h₁ : ∃ x, x ^ 3 = n) (h₂ : ∃ t, t ^ 4 = n) : 4096 ≤ n",
    "theorem imo_1964_p1_2 (n : ℕ) : ¬7 ∣ 2 ^ n + 1",
]


class CheckFailed(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="a Hugging Face model folder; default: a tiny random Llama built here")
    parser.add_argument("--samples", type=int, default=8, help="rollouts per prompt (default: 8, the recipe's)")
    parser.add_argument("--response-tokens", type=int, default=1024, help="answer budget in tokens (default: 1024)")
    parser.add_argument("--steps", type=int, default=2, help="h100x8-shaped steps to time (default: 2)")
    parser.add_argument("--learning-rate", type=float, default=1e-3,
                        help="for this check only, so one step visibly changes the model (default: 1e-3)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.5, help="vLLM's share (default: 0.5)")
    parser.add_argument("--logprob-tolerance", type=float, default=0.25,
                        help="largest mean |vLLM − learner| log-prob gap, in nats, after the push (default: 0.25)")


def main(args: argparse.Namespace) -> int:
    problem = _missing_requirement()
    if problem:
        print(f"gpu_check: {problem}", file=sys.stderr)
        return 2
    try:
        _run_checks(args)
    except CheckFailed as failure:
        print(f"\nFAILED: {failure}", file=sys.stderr)
        return 1
    print("\nall GPU checks passed")
    return 0


def _missing_requirement() -> str | None:
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        return ("no CUDA GPU is visible (torch.cuda.is_available() is False); run this on a GPU node with a "
                "CUDA build of torch, and check CUDA_VISIBLE_DEVICES")
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed in this environment; `pip install vllm` on the GPU node, then rerun"
    return None


def _run_checks(args: argparse.Namespace) -> None:
    import torch

    from trainer.learner import Learner
    from trainer.models import load_policy
    from trainer.rollout.base import SamplingSettings
    from trainer.rollout.vllm_engine import VllmEngine

    print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, vllm {_vllm_version()}")
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        model_folder = args.model or _build_tiny_random_llama(Path(scratch) / "tiny-llama")
        config = _one_gpu_config(model_folder, args)
        model, tokenizer = load_policy(config.model)
        learner = Learner(config, model, tokenizer)

        started = time.perf_counter()
        engine = VllmEngine.from_config(config, learner.model, tokenizer)
        print(f"vLLM ready in {time.perf_counter() - started:.1f} s (includes the first weight push)")
        try:
            prompts = _prompts(tokenizer, config.rollout.prompts_per_step)
            _check_sampling(engine, prompts[:4], SamplingSettings.from_config(config.rollout, seed=0))
            _check_weight_push(engine, learner, tokenizer, config, prompts[:4], args.logprob_tolerance)
            _time_steps(engine, learner, tokenizer, config, prompts, args.steps)
        finally:
            engine.close()


def _one_gpu_config(model_folder: str, args: argparse.Namespace):
    from trainer.config import RunConfig

    preset = RunConfig.from_preset("h100x8")
    prompts_per_gpu = preset.rollout.prompts_per_step // GPUS_IN_PRESET  # 32
    mini_batch_per_gpu = preset.optimizer.mini_batch_prompts // GPUS_IN_PRESET  # 4: still 8 optimizer steps
    return RunConfig.from_preset("h100x8", {
        "model": {"source": "huggingface", "name_or_path": str(model_folder)},
        "rollout": {
            "prompts_per_step": prompts_per_gpu, "samples_per_prompt": args.samples,
            "max_prompt_tokens": 512, "max_response_tokens": args.response_tokens,
            "vllm_gpu_memory_utilization": args.gpu_memory_utilization,
        },
        "retry": {"max_prompt_tokens": 1024},
        "optimizer": {"learning_rate": args.learning_rate, "mini_batch_prompts": mini_batch_per_gpu},
        "cluster": {"num_gpus": 1},
    })


def _build_tiny_random_llama(folder: Path) -> str:
    """Random weights with SmolLM2's tokenizer; head size 64, which every vLLM attention backend supports."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from trainer.models import smollm2_tokenizer

    tokenizer = smollm2_tokenizer()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    print(f"built a tiny random Llama in {folder} (vocabulary {len(tokenizer)}, hidden 256, 4 layers)")
    return str(folder)


def _prompts(tokenizer, count: int) -> list[str]:
    prompts = []
    for index in range(count):
        request = ("Complete the following Lean 4 proof. Think first, then give one ```lean4 block.\n\n"
                   f"{STATEMENTS[index % len(STATEMENTS)]} := by")
        if getattr(tokenizer, "chat_template", None):
            prompts.append(tokenizer.apply_chat_template([{"role": "user", "content": request}],
                                                         tokenize=False, add_generation_prompt=True))
        else:
            prompts.append(request)
    return prompts


def _check_sampling(engine, prompts, sampling) -> None:
    print(f"\n[1] vLLM samples {sampling.n} answers for each of {len(prompts)} prompts")
    started = time.perf_counter()
    generations = list(engine.generate(prompts, sampling))
    seconds = time.perf_counter() - started
    tokens = sum(g.num_tokens for g in generations)
    keys = sorted((g.prompt_index, g.sample_index) for g in generations)
    if keys != [(p, s) for p in range(len(prompts)) for s in range(sampling.n)]:
        raise CheckFailed(f"expected every (prompt, sample) once, got {keys}")
    truncated = sum(g.is_truncated for g in generations)
    print(f"    {len(generations)} answers, {tokens} tokens in {seconds:.2f} s: {tokens / seconds:,.0f} tokens/s; "
          f"{truncated} truncated at {sampling.max_tokens} tokens")
    first, last = min(g.seconds for g in generations), max(g.seconds for g in generations)
    print(f"    first answer handed over at {first:.2f} s, last at {last:.2f} s (streaming)")


def _check_weight_push(engine, learner, tokenizer, config, prompts, tolerance: float) -> None:
    from trainer.rollout.base import SamplingSettings

    print("\n[2] a learner step, then the weight push into vLLM")
    greedy = SamplingSettings.greedy(max_tokens=32)
    before = next(engine.generate([PROBE_PROMPT], greedy))
    fixed_ids = tokenizer(PROBE_PROMPT + FIXED_CONTINUATION, add_special_tokens=False)["input_ids"]
    vllm_before = _vllm_token_logprobs(engine, fixed_ids)

    sequences = _scored_sequences(engine, tokenizer, prompts, SamplingSettings.from_config(config.rollout, seed=1))
    engine.sleep()
    metrics = learner.step(sequences)
    print(f"    learner: {metrics['optimizer_steps']} optimizer steps, loss {metrics['loss']:.3g}, "
          f"grad norm {metrics['grad_norm']:.3g} (synthetic rewards: even samples 1, odd 0)")
    started = time.perf_counter()
    engine.push_weights(learner.model)
    print(f"    weights pushed in {time.perf_counter() - started:.2f} s")

    after = next(engine.generate([PROBE_PROMPT], greedy))
    print(f"    greedy before: {before.text[:80]!r}")
    print(f"    greedy after:  {after.text[:80]!r}")
    if after.token_ids == before.token_ids:
        raise CheckFailed("the greedy answer did not change after the learner step and the weight push; "
                          "vLLM may still be serving the old weights")

    vllm_after = _vllm_token_logprobs(engine, fixed_ids)
    learner_now = _learner_token_logprobs(learner, fixed_ids)
    gap_before = statistics.fmean(abs(a - b) for a, b in zip(vllm_before, learner_now))
    gap_after = statistics.fmean(abs(a - b) for a, b in zip(vllm_after, learner_now))
    print(f"    mean |vLLM − learner| log-prob on a fixed text: {gap_before:.4f} nats before the push, "
          f"{gap_after:.4f} after")
    if not gap_after < gap_before:
        raise CheckFailed(f"vLLM did not move toward the learner ({gap_before:.4f} → {gap_after:.4f} nats)")
    if gap_after > tolerance:
        raise CheckFailed(f"vLLM and the learner disagree by {gap_after:.4f} nats per token after the push "
                          f"(tolerance {tolerance}); some weights did not arrive")


def _scored_sequences(engine, tokenizer, prompts, sampling):
    """Rollouts with synthetic rewards (no Lean here): even samples 1, odd 0, then Dr.GRPO advantages."""
    import torch

    from trainer.learner import TrainingSequence, group_advantages

    generations = sorted(engine.generate(prompts, sampling), key=lambda g: (g.prompt_index, g.sample_index))
    rewards = torch.tensor([[1.0 if g.sample_index % 2 == 0 else 0.0 for g in generations
                             if g.prompt_index == p] for p in range(len(prompts))])  # (G, N)
    advantages = group_advantages(rewards)
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    return [
        TrainingSequence(prompt_ids=prompt_ids[g.prompt_index], response_ids=g.token_ids,
                         advantage=float(advantages[g.prompt_index, g.sample_index]),
                         group_key=f"p{g.prompt_index}", rollout_key=f"p{g.prompt_index}-r{g.sample_index}")
        for g in generations if g.num_tokens > 0
    ]


def _vllm_token_logprobs(engine, token_ids: list[int]) -> list[float]:
    """vLLM's log-probability of each token after the first, given those before it."""
    import vllm

    engine.wake()
    params = vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
    (output,) = engine.llm.generate([{"prompt_token_ids": token_ids}], sampling_params=params, use_tqdm=False)
    return [entry[token].logprob for token, entry in zip(token_ids[1:], output.prompt_logprobs[1:])]


def _learner_token_logprobs(learner, token_ids: list[int]) -> list[float]:
    import torch

    with torch.no_grad(), learner._autocast():
        input_ids = torch.tensor([token_ids], device=learner.device)
        logits = learner.model(input_ids=input_ids, use_cache=False).logits[0, :-1].float()  # (T-1, V)
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, input_ids[0, 1:].unsqueeze(-1)).squeeze(-1).tolist()


def _time_steps(engine, learner, tokenizer, config, prompts, steps: int) -> None:
    from trainer.rollout.base import SamplingSettings

    rollout = config.rollout
    print(f"\n[3] {steps} h100x8-shaped steps on one GPU: {rollout.prompts_per_step} prompts × "
          f"{rollout.samples_per_prompt} samples, up to {rollout.max_response_tokens} tokens, "
          f"mini-batches of {config.optimizer.mini_batch_prompts} prompts")
    for step in range(steps):
        sampling = SamplingSettings.from_config(rollout, seed=100 + step)
        started = time.perf_counter()
        sequences = _scored_sequences(engine, tokenizer, prompts, sampling)
        generation_s = time.perf_counter() - started
        tokens = sum(len(s.response_ids) for s in sequences)

        started = time.perf_counter()
        engine.sleep()
        metrics = learner.step(sequences)
        learning_s = time.perf_counter() - started

        started = time.perf_counter()
        engine.push_weights(learner.model)
        engine.wake()
        sync_s = time.perf_counter() - started

        total = generation_s + learning_s + sync_s
        print(f"    step {step}: {tokens:,} tokens, {tokens / generation_s:,.0f} generated tokens/s, "
              f"{metrics['optimizer_steps']} optimizer steps; time: generation {generation_s:.2f} s "
              f"({generation_s / total:.0%}), learning {learning_s:.2f} s ({learning_s / total:.0%}), "
              f"weight sync {sync_s:.2f} s ({sync_s / total:.0%})")


def _vllm_version() -> str:
    import vllm

    return getattr(vllm, "__version__", "unknown")


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.splitlines()[0],
                                     epilog="Exits 2 without a CUDA GPU or vLLM, 1 when a check fails.")
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(cli())
