"""Where an asynchronous run may run: η's bounds per preset, and the GPU layouts it needs.

With ``rollout.max_staleness`` (η) ≥ 1 generation and Lean go on while the learner updates, and
a batch may be trained up to η policy updates after the weights that wrote it (issue 25). Two
things can make such a run wrong before its first step, and both are refused at launch here:

- **η beyond what its preset was sized for.** Each update moves the policy by a whole batch (the
  recipe's 8 optimizer steps); the further behind the behaviour policy, the more tokens the
  truncated importance weight ``min(π_prox / π_behaviour, C)`` clips, and the further the run
  strays from the release's numbers. The bounds, and why:

  | preset | default | bound | why |
  | --- | --- | --- | --- |
  | h100x8 | 0 | 2 | 0 is the release's synchronous run. verl's one-step-off-policy is η = 1 (+23% with FSDP2 on Qwen2.5-Math-7B); 2 lets a Lean tail as long as a whole learner step still be trained rather than dropped. AReaL runs η up to 4–8, but with its own learning rate and batch; a run past 2 is a new recipe, which an administrator adds as a preset of its own. |
  | cpu-demo, cpu-smoke | 0 | 2 | The same bound as h100x8, so what a CPU run checks covers the GPU's bound; on 2 cores more batches in flight would only queue behind one generator process. |

- **a GPU layout with nowhere to generate.** On GPUs an asynchronous run keeps two pools in one
  placement group: ``cluster.num_gpus − cluster.rollout_gpus`` learner GPUs (FSDP; the driver places one
  learner-rank actor on each) and ``cluster.rollout_gpus`` rollout GPUs, as verl's one-step-off-policy
  lays them out. Learner rank 0 starts the pool: one Ray actor per rollout engine, each seeing only the
  GPUs Ray gave it (trainer/asynchronous/engine_actors.py; vLLM engines of
  ``rollout.vllm_tensor_parallel_size`` GPUs, transformers one GPU each), and broadcasts them the
  gathered weights after each update over the pool's weight group (trainer/loop/distributed.py). One GPU, no rollout pool, a pool
  that takes every GPU, or a pool vLLM's tensor-parallel engines do not tile cannot run so. A
  rollout pool under the synchronous loop (η = 0) would sit idle through every learner step, and is
  refused too. On CPU (``cluster.num_gpus`` 0) generation runs in one process of its own beside the
  one learner process, and there are no pools to set.

Torch-free and driver-free, beside trainer/ranks.py (whose rules it reads): the platform's launch
check (trainer/memory/memory_fit.py, through the form and the API), ``python -m trainer run`` and
``python -m trainer memory-plan`` all refuse with these messages. The rules are tested in
tests/learning/test_asynchronous_layouts_are_refused_at_launch_saying_why.py.
"""

from __future__ import annotations

from typing import NamedTuple

from trainer.config import RolloutEngineKind, RunConfig

# η's most per preset (the table above). A preset not listed here runs synchronously only.
STALENESS_BOUNDS: dict[str, int] = {"h100x8": 2, "cpu-demo": 2, "cpu-smoke": 2}


class LayoutRefusal(NamedTuple):
    """Why a run cannot run as laid out: the config field a person would change first, and the sentence."""

    config_field: str
    message: str


def staleness_bound(preset: str) -> int:
    """The most updates a trained batch may lag the learner under ``preset``; 0 for a preset not sized for more."""
    return STALENESS_BOUNDS.get(preset, 0)


def asynchronous_layout_refusal(config: RunConfig, preset: str | None = None) -> LayoutRefusal | None:
    """The first rule of η and the GPU pools that ``config`` breaks, with its field; None when it may run.

    ``preset`` is the preset whose bound applies (default: the config's own).
    """
    preset = preset or config.preset
    staleness = config.rollout.max_staleness
    bound = staleness_bound(preset)
    if staleness > bound:
        allowed = "0 (this preset runs synchronously only)" if bound == 0 else f"0 to {bound}"
        return LayoutRefusal("rollout.max_staleness", (
            f"rollout.max_staleness (η) is {staleness}, above the {preset} preset's bound of {bound}: a batch "
            f"trained {staleness} updates after the weights that wrote it is further off-policy than this preset's "
            f"learning rate and batch were sized for; set rollout.max_staleness to {allowed}"))

    gpus, rollout_gpus = config.cluster.num_gpus, config.cluster.rollout_gpus
    if gpus == 0:
        if rollout_gpus:
            return LayoutRefusal("cluster.rollout_gpus", (
                f"cluster.rollout_gpus is {rollout_gpus} but the run has no GPUs (cluster.num_gpus 0): on CPU the "
                f"asynchronous loop generates in a process of its own, with no pool to set apart; set "
                f"cluster.rollout_gpus to 0"))
        return None

    if staleness == 0:
        if rollout_gpus:
            return LayoutRefusal("cluster.rollout_gpus", (
                f"cluster.rollout_gpus is {rollout_gpus} but rollout.max_staleness (η) is 0: the synchronous loop "
                f"generates and learns on the same GPUs one after the other, so a rollout pool would sit idle through "
                f"every learner step; set cluster.rollout_gpus to 0, or rollout.max_staleness to "
                f"{'1' if bound == 1 else '1 or 2' if bound == 2 else f'1 to {bound}'} to generate there while the "
                f"learner trains"))
        return None

    asynchronous = f"an asynchronous run (rollout.max_staleness {staleness}) generates on a pool of rollout GPUs " \
                   f"while the learner trains on the others"
    if gpus == 1:
        return LayoutRefusal("rollout.max_staleness", (
            f"{asynchronous}, and cluster.num_gpus is 1: one GPU cannot be both; use at least 2 GPUs "
            f"(e.g. cluster.num_gpus 2 with cluster.rollout_gpus 1), or set rollout.max_staleness to 0"))
    example = f"e.g. {gpus // 4 or 1} of {gpus}"
    if rollout_gpus == 0:
        return LayoutRefusal("cluster.rollout_gpus", (
            f"{asynchronous}, and cluster.rollout_gpus is 0: no GPU is set apart for rollouts; set "
            f"cluster.rollout_gpus to 1 to {gpus - 1} ({example}), or rollout.max_staleness to 0"))
    if rollout_gpus >= gpus:
        return LayoutRefusal("cluster.rollout_gpus", (
            f"{asynchronous}, and cluster.rollout_gpus is {rollout_gpus} of the run's {gpus} GPUs "
            f"(cluster.num_gpus): no GPU is left for the learner; set cluster.rollout_gpus to 1 to {gpus - 1} "
            f"({example})"))
    if config.rollout.engine is RolloutEngineKind.VLLM:
        tensor_parallel = config.rollout.vllm_tensor_parallel_size
        if rollout_gpus % tensor_parallel:
            fits = ", ".join(str(size) for size in range(1, rollout_gpus + 1) if rollout_gpus % size == 0)
            return LayoutRefusal("rollout.vllm_tensor_parallel_size", (
                f"rollout.vllm_tensor_parallel_size is {tensor_parallel}, which does not divide the rollout pool's "
                f"{rollout_gpus} GPU{'s' if rollout_gpus != 1 else ''} (cluster.rollout_gpus): each vLLM engine spans "
                f"that many GPUs of the pool; set it to one of {fits}, or cluster.rollout_gpus to a multiple of "
                f"{tensor_parallel}"))
    return None


def asynchronous_layout_problem(config: RunConfig, preset: str | None = None) -> str | None:
    """Why ``config`` cannot run with its η on its GPUs, as one sentence that says what to set; None when it can."""
    refusal = asynchronous_layout_refusal(config, preset)
    return refusal.message if refusal else None


def learner_gpus(config: RunConfig) -> int:
    """The learner pool: every GPU but the rollout pool (all of them when there is no pool)."""
    return config.cluster.num_gpus - config.cluster.rollout_gpus

