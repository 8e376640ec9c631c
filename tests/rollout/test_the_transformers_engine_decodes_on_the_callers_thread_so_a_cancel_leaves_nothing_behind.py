"""The transformers engine decodes on the thread that reads its stream: no thread of its own.

A second thread doing torch work costs every op 10–57% on two cores (a second OpenMP team throttles libgomp's
spin-waits: benchmarks/torch_off_the_main_thread.py), and a decoding thread could outlive a cancelled run: a thread still inside a torch op
when Python finalizes is ended through C++ frames that cannot unwind (``terminate called without an active
exception``: the run exits -6 instead of 143). Decoding on the caller's thread removes both.
"""

from __future__ import annotations

import subprocess
import sys
import threading

from deploy.services import REPO_DIR
from tests.rollout.test_transformers_engine_samples import sampling
from trainer.rollout.transformers_engine import TransformersEngine

CANCELLED_WHILE_DECODING = """
from tests.rollout.conftest import stop_or_go_model, word_level_tokenizer
from tests.rollout.test_transformers_engine_samples import sampling
from trainer.rollout.transformers_engine import TransformersEngine

tokenizer = word_level_tokenizer()
engine = TransformersEngine(stop_or_go_model(tokenizer), tokenizer)

class Progress:  # the run's signal handler raising at the fifth decoding step
    steps = 0
    def update(self, prompt_index, sample_index, tokens, text):
        self.steps += 1
        if self.steps == 5:
            raise KeyboardInterrupt

try:
    list(engine.generate(["theorem go"] * 8, sampling(n=2, max_tokens=200), progress=Progress()))
except KeyboardInterrupt:
    print("cancelled")
"""


def test_decoding_starts_no_thread_and_reports_progress_on_the_readers_thread(stop_or_go_llama, tokenizer):
    before = set(threading.enumerate())
    seen = []

    class Progress:
        def update(self, prompt_index, sample_index, tokens, text):
            seen.append((threading.current_thread(), set(threading.enumerate()) - before))

    answers = list(TransformersEngine(stop_or_go_llama, tokenizer).generate(
        ["theorem go", "theorem stop"], sampling(n=2, max_tokens=6), progress=Progress()))
    assert len(answers) == 4 and seen
    assert all(thread is threading.current_thread() and not started for thread, started in seen)


def test_the_process_ends_cleanly_when_a_cancel_lands_while_decoding():
    ended = subprocess.run([sys.executable, "-c", CANCELLED_WHILE_DECODING], cwd=REPO_DIR,
                           capture_output=True, text=True, timeout=300)
    assert ended.stdout.strip() == "cancelled", ended.stderr[-3000:]
    assert ended.returncode == 0, ended.stderr[-3000:]
    assert "terminate called" not in ended.stderr


def test_closing_the_engine_ends_a_batch_nobody_reads_any_more(stop_or_go_llama, tokenizer):
    engine = TransformersEngine(stop_or_go_llama, tokenizer)
    decoding, closed = threading.Event(), threading.Event()

    class Progress:  # holds the first decoding step until the engine is closed
        def update(self, prompt_index, sample_index, tokens, text):
            decoding.set()
            closed.wait(120)

    stream = engine.generate(["theorem go"], sampling(n=2, max_tokens=200), progress=Progress())
    answers = []
    reader = threading.Thread(target=lambda: answers.extend(stream), daemon=True)
    reader.start()
    assert decoding.wait(120), "the batch never started decoding"
    engine.close()
    closed.set()
    reader.join(120)
    assert not reader.is_alive(), "the batch went on decoding after the engine was closed"
    assert len(answers) == 2 and all(answer.is_truncated and answer.num_tokens < 200 for answer in answers)
