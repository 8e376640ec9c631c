"""The rules of a run over several ranks (one process per learner GPU: a learner-rank actor of the driver,
trainer/loop/ray_driver.py, which gives it torchrun's environment), as pure rules.

Where this process stands in its world of ranks, whether a run's config fits the ranks started, and
which ranks share one vLLM engine. Torch-free and driver-free, so a rollout engine, the memory
plan and the launch checks read the rules without loading the learner: trainer/loop/distributed.py
runs the ranks by them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainer.config import RolloutEngineKind, RunConfig
from trainer.staleness import asynchronous_layout_refusal, learner_gpus


# --- the GPUs a run asks for ----------------------------------------------------------------------

# Tests and the CPU stand-ins of a GPU layout (several learner ranks and a rollout pool, on gloo and CPU)
# set it: there, CPU processes stand in for the GPUs cluster.num_gpus counts, and say so by this name.
CPU_STANDS_IN_FOR_GPUS = "TRAINER_CPU_STANDS_IN_FOR_GPUS"
# CUDA 13.0's minimum Linux driver: requirements-gpu.lock pins torch's CUDA 13.0 wheels (nvidia-cuda-runtime 13.0).
MINIMUM_NVIDIA_DRIVER = "580"


def cpu_stands_in_for_gpus(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether CPU processes stand in for the run's GPUs (``CPU_STANDS_IN_FOR_GPUS``: tests of GPU layouts)."""
    return environ.get(CPU_STANDS_IN_FOR_GPUS) == "1"


def check_cuda_for_gpus(num_gpus: int, environ: Mapping[str, str] = os.environ) -> None:
    """Fail at start when a run asks for GPUs that this node's PyTorch cannot use.

    Without it the learner, SFT and torch.distributed would quietly fall back to the CPU and gloo,
    and a run people pay GPUs for would crawl on the host instead of failing with the cause.
    """
    if num_gpus <= 0 or cpu_stands_in_for_gpus(environ):
        return
    import torch

    if torch.cuda.is_available():
        return
    if torch.version.cuda is None:
        cause = f"this PyTorch ({torch.__version__}) is a CPU-only build; install requirements-gpu.lock"
    else:
        try:
            torch.cuda.init()
            cause = f"PyTorch (CUDA {torch.version.cuda}) sees no GPU"
        except Exception as error:  # noqa: BLE001 - its message is the cause (no driver, a driver too old, ...)
            cause = f"PyTorch (CUDA {torch.version.cuda}) cannot start CUDA: {error}"
        visible = environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            cause += f" (CUDA_VISIBLE_DEVICES={visible!r})"
    raise RuntimeError(
        f"cluster.num_gpus is {num_gpus} but this node has no working CUDA: {cause}. Run it on a GPU node with "
        f"the NVIDIA driver {MINIMUM_NVIDIA_DRIVER} or newer, or set cluster.num_gpus=0 to run on the CPU"
    )


# --- the run's shared budgets ------------------------------------------------------------------------


def in_flight_share(max_in_flight: int, scoring_ranks: int, rank: int) -> int:
    """This rank's part of verifier.max_in_flight, a budget for the whole run (the Lean server's REPLs are
    sized by it, docs/operations/sizing.md): split as evenly as it goes, the first ranks taking the remainder, and
    at least one proof per scoring rank, so a budget below the rank count holds one per rank."""
    if rank >= scoring_ranks:
        return max_in_flight  # a rank that scores nothing for the run: its budget is never drawn on
    base, remainder = divmod(max_in_flight, scoring_ranks)
    return max(1, base + (1 if rank < remainder else 0))


# --- where this process stands --------------------------------------------------------------------


@dataclass(frozen=True)
class RankPosition:
    """This process's place among the run's learner ranks."""

    rank: int
    world_size: int
    local_rank: int


def torchrun_position(environ: Mapping[str, str] = os.environ) -> RankPosition | None:
    """RANK, WORLD_SIZE and LOCAL_RANK, torchrun's names, which the driver sets in each learner-rank actor; None for
    a process that runs alone."""
    world_size = int(environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return None
    if "RANK" not in environ:
        raise ValueError(
            f"WORLD_SIZE is {world_size} but RANK is not set; start the run with `python -m trainer run ...` alone: "
            "its driver sets both in each learner-rank actor (trainer/loop/ray_driver.py)"
        )
    rank = int(environ["RANK"])
    if not 0 <= rank < world_size:
        raise ValueError(f"RANK must be in [0, {world_size}), got {rank}; let the driver set it")
    return RankPosition(rank, world_size, int(environ.get("LOCAL_RANK", rank)))


def check_launch_fits_config(config: RunConfig, position: RankPosition | None) -> None:
    """Fail at start-up when the processes started do not match the learner's GPUs.

    The driver starts one learner rank per learner GPU: every GPU of ``cluster.num_gpus`` but the rollout pool
    (``cluster.rollout_gpus``), whose generator processes learner rank 0 starts itself.
    """
    gpus, learners = config.cluster.num_gpus, learner_gpus(config)
    refusal = asynchronous_layout_refusal(config)  # η's bound, on CPU too, and the two pools
    if refusal:
        raise ValueError(refusal.message)
    if position is None:
        if learners > 1:
            raise ValueError(
                f"cluster.num_gpus is {gpus}{_of_which_pool(config)}, so the learner has {learners} GPUs, but this "
                f"trainer runs as one rank; start it with `python -m trainer run ...` alone, whose driver places one "
                f"learner-rank actor per learner GPU ({learners}, trainer/loop/ray_driver.py), or set "
                f"cluster.num_gpus to {1 + config.cluster.rollout_gpus}"
            )
        if learners == 1:
            check_world_fits_config(config, 1)  # one GPU holds one engine of tensor-parallel size 1
        return
    check_world_fits_config(config, position.world_size)


def _of_which_pool(config: RunConfig) -> str:
    rollout_gpus = config.cluster.rollout_gpus
    return f" of which {rollout_gpus} are the rollout pool (cluster.rollout_gpus)" if rollout_gpus else ""


def rollout_tensor_parallel_size(config: RunConfig) -> int:
    """Ranks that share one rollout engine: vLLM's tensor-parallel size; 1 for an engine that never shards."""
    return config.rollout.vllm_tensor_parallel_size if config.rollout.engine is RolloutEngineKind.VLLM else 1


def tensor_parallel_problem(tensor_parallel_size: int, world_size: int) -> str | None:
    """Why vLLM engines of ``tensor_parallel_size`` consecutive ranks cannot tile ``world_size`` ranks, or None.

    The one statement of the rule: the launch checks (``rank_rule_problems``), ``EngineGroups``
    and ``VllmEngine.from_config`` all refuse with this message.
    """
    if tensor_parallel_size >= 1 and world_size % tensor_parallel_size == 0:
        return None
    sizes = ", ".join(str(size) for size in range(1, world_size + 1) if world_size % size == 0)
    more_gpus = f", or cluster.num_gpus to a multiple of {tensor_parallel_size}" if tensor_parallel_size >= 1 else ""
    return (f"rollout.vllm_tensor_parallel_size, the consecutive ranks each vLLM engine spans (one tensor-parallel "
            f"shard on each), must divide the run's {world_size} rank{'s' if world_size != 1 else ''} (one per GPU, "
            f"cluster.num_gpus) but is {tensor_parallel_size}; set it to one of {sizes}{more_gpus}")


def lean_tool_calls_problem(config: RunConfig, world_size: int) -> str | None:
    """Why ``config`` cannot ask Lean inside the reasoning on ``world_size`` ranks; None when it can.

    Generating on its learner ranks, a data-parallel run samples in lockstep (the ranks of one vLLM
    engine must decode alike, and every rank waits at each step's exchange): an answer paused for Lean
    would stall or split them, which trainer/loop/distributed.py does not do yet. A rollout pool
    (``cluster.rollout_gpus``) generates in processes of its own, each pausing its answers for Lean
    itself (trainer/asynchronous/generator_process.py), as one process does.
    """
    calls = config.rollout.lean_tool_calls
    if calls == 0 or world_size <= 1 or config.cluster.rollout_gpus > 0:
        return None
    return (f"rollout.lean_tool_calls is {calls}, but this run generates on its {world_size} learner ranks, which "
            f"cannot pause an answer for Lean yet (they sample in lockstep); set rollout.lean_tool_calls to 0, run on "
            f"one GPU (cluster.num_gpus 1), or generate on a rollout pool (rollout.max_staleness 1 or more with "
            f"cluster.rollout_gpus 1 or more)")


def rank_rule_problems(config: RunConfig, world_size: int) -> list[tuple[str, str]]:
    """(config field, message) for each rule of a run of ``world_size`` ranks that ``config`` breaks.

    An asynchronous run's layout comes first (trainer/staleness.py: η's bound, the two pools);
    one it refuses is refused for that reason alone. vLLM's engines tile every rank, or the
    rollout pool alone (a rule of the layout's).

    The learner shards every mini-batch's sequences over its ranks (every rank, or the learner
    pool when ``cluster.rollout_gpus`` sets a rollout pool apart), and the shares need not be
    equal: each rank scales its share's loss by the whole mini-batch's sequence count and FSDP
    averages the gradients, so any split gives one process's update (Learner.gradient_scale;
    tests/learning/test_uneven_rank_shares_train_as_one_process.py). A mini-batch's count varies
    anyway (retries; zero advantages are not trained). So 32 prompts train on verl's 6 + 2 layout.
    What is refused is a mini-batch of fewer sequences than learner ranks: some rank would then
    hold no sequence in any mini-batch, even one with nothing left out, a GPU paid for that only
    runs zero-weighted placeholder passes. Engine groups may likewise roll out unequal numbers of
    slots (``owned_slot_indices``); the step waits for the busiest.
    """
    refusal = asynchronous_layout_refusal(config)
    if refusal:
        return [tuple(refusal)]
    problems = []
    has_rollout_pool = config.cluster.rollout_gpus > 0
    tool_problem = lean_tool_calls_problem(config, world_size)
    if tool_problem:
        problems.append(("rollout.lean_tool_calls", tool_problem))
    if not has_rollout_pool:
        engines_problem = tensor_parallel_problem(rollout_tensor_parallel_size(config), world_size)
        if engines_problem:
            problems.append(("rollout.vllm_tensor_parallel_size", engines_problem))
    learner_ranks = learner_gpus(config) if has_rollout_pool else world_size
    mini_batch = config.optimizer.mini_batch_prompts
    samples = config.rollout.samples_per_prompt
    if mini_batch * samples < learner_ranks:
        ranks = (f"the learner pool's {learner_ranks} ranks (cluster.num_gpus − cluster.rollout_gpus)"
                 if has_rollout_pool else f"the {learner_ranks} ranks")
        idle = learner_ranks - mini_batch * samples
        prompts_that_fit = -(-learner_ranks // samples)  # ceil: the fewest prompts whose samples give each rank one
        samples_that_fit = -(-learner_ranks // mini_batch)
        problems.append(("optimizer.mini_batch_prompts", (
            f"optimizer.mini_batch_prompts ({mini_batch}) × rollout.samples_per_prompt ({samples}) is {mini_batch * samples} "
            f"sequence{'s' if mini_batch * samples != 1 else ''} per optimizer step, fewer than {ranks} that share each "
            f"mini-batch's sequences: {idle} of them would hold none in any mini-batch and only run zero-weighted "
            f"placeholder passes; set optimizer.mini_batch_prompts to at least {prompts_that_fit} (and "
            f"rollout.prompts_per_step to a multiple of it), or rollout.samples_per_prompt to at least {samples_that_fit}")))
    return problems


def check_world_fits_config(config: RunConfig, world_size: int) -> None:
    """The rules a run of ``world_size`` learner ranks adds to RunConfig's own, checked before anything is loaded."""
    refusal = asynchronous_layout_refusal(config)  # a layout with no learner pool has no rank count to match
    if refusal:
        raise ValueError(refusal.message)
    learners = learner_gpus(config)
    if learners != world_size:
        raise ValueError(
            f"this process is one of {world_size} ranks but cluster.num_gpus is {config.cluster.num_gpus}"
            f"{_of_which_pool(config)}, which leaves {learners} learner GPU(s), one rank each; start the run with "
            f"`python -m trainer run` alone (its driver starts {learners} ranks) or set cluster.num_gpus to "
            f"{world_size + config.cluster.rollout_gpus}"
        )
    for _, message in rank_rule_problems(config, world_size):
        raise ValueError(message)


@dataclass(frozen=True)
class EngineGroups:
    """Which ranks share one rollout engine: runs of ``tensor_parallel_size`` consecutive ranks.

    Consecutive because vLLM's external launcher forms its tensor-parallel groups so (its rank
    layout is external data parallel × pipeline × tensor, tensor innermost), and because
    the placement rule puts a group's ranks in one bundle (trainer/cluster/placement.py), which keeps it on one
    node's NVLink.
    """

    world_size: int
    tensor_parallel_size: int = 1

    def __post_init__(self) -> None:
        problem = tensor_parallel_problem(self.tensor_parallel_size, self.world_size)
        if problem:
            raise ValueError(problem)

    @property
    def count(self) -> int:
        return self.world_size // self.tensor_parallel_size

    def engine_of(self, rank: int) -> int:
        return rank // self.tensor_parallel_size

    def member_of(self, rank: int) -> int:
        """Which shard of its engine ``rank`` holds, and so which share of its answers it scores."""
        return rank % self.tensor_parallel_size

    def ranks_of(self, engine: int) -> list[int]:
        first = engine * self.tensor_parallel_size
        return list(range(first, first + self.tensor_parallel_size))

    def all_ranks(self) -> list[list[int]]:
        return [self.ranks_of(engine) for engine in range(self.count)]

    def scores(self, rank: int, prompt_index: int, sample_index: int, samples_per_prompt: int) -> bool:
        """Whether ``rank`` scores this answer of its engine: every tp-th by position, so the group shares Lean's work."""
        position = prompt_index * samples_per_prompt + sample_index
        return position % self.tensor_parallel_size == self.member_of(rank)


def owned_slot_indices(num_slots: int, engine: int, engines: int) -> list[int]:
    """The prompt slots one engine group rolls out: every engines-th, so each GRPO group stays on one engine."""
    return list(range(engine, num_slots, engines))
