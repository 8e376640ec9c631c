"""Torch work on a second thread against the same work on the main thread, in one process.

Why the transformers engine decodes on its caller's thread (trainer/rollout/transformers_engine.py): each
thread that runs a parallel torch op becomes the master of its own OpenMP team, and once a process manages more
OpenMP threads than the machine has cores, libgomp throttles every team's spin-wait before sleeping. A decoding
step is hundreds of small ops (a matmul of 16 rows by one weight, a norm, a rotary), each waking the team again.

The work: ``--calls`` bfloat16 decode-shaped matmuls (16 × 576 by 576 × 1536, SmolLM2-135M's MLP), the median
of ``--repeats`` rounds, first on the main thread, then on a new thread (a second team), then on the main thread
again; the ratio is the thread's time over the main thread's mean.

Rerun: .venv/bin/python benchmarks/torch_off_the_main_thread.py [--calls 1200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import threading

from timing import median_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import torch

    activation = torch.randn(16, 576, dtype=torch.bfloat16)
    weights = [torch.randn(1536, 576, dtype=torch.bfloat16) for _ in range(60)]

    def work() -> None:
        for index in range(args.calls):
            torch.nn.functional.linear(activation, weights[index % len(weights)])

    def timed() -> float:
        return median_seconds(work, args.repeats)

    load_before = os.getloadavg()[0]
    main_first = timed()
    on_thread: list[float] = []
    thread = threading.Thread(target=lambda: on_thread.append(timed()))
    thread.start()
    thread.join()
    main_again = timed()
    main_mean = (main_first + main_again) / 2
    print(f"{os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} torch threads; "
          f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"main thread {main_first * 1e3:.0f} ms and {main_again * 1e3:.0f} ms, second thread {on_thread[0] * 1e3:.0f} ms "
          f"for {args.calls} matmuls: the second thread takes {on_thread[0] / main_mean:.2f}× the main thread's time")


if __name__ == "__main__":
    main()
