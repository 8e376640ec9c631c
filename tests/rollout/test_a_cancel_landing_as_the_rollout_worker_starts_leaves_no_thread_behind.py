"""A cancel can land while the transformers engine starts its decoding thread (Ray's SIGTERM, raised by the
run's handler as the thread is being started). The thread must not outlive the interpreter: a daemon thread
still inside a torch op when Python finalizes is ended by pthread_exit through C++ frames that cannot unwind
(``terminate called without an active exception``: the cancelled run exits -6 instead of 143)."""

from __future__ import annotations

import subprocess
import sys
import threading

from deploy.services import REPO_DIR
from tests.rollout.test_transformers_engine_samples import sampling
from trainer.rollout.transformers_engine import TransformersEngine

CANCELLED_AS_THE_WORKER_STARTS = """
import threading
from tests.rollout.conftest import stop_or_go_model, word_level_tokenizer
from tests.rollout.test_transformers_engine_samples import sampling
from trainer.rollout.transformers_engine import TransformersEngine

tokenizer = word_level_tokenizer()
engine = TransformersEngine(stop_or_go_model(tokenizer), tokenizer)
start = threading.Thread.start

def start_then_cancel(thread):
    start(thread)
    if thread.name == "transformers-rollout":
        raise KeyboardInterrupt  # the run's signal handler raising while start() waits for the thread

threading.Thread.start = start_then_cancel
try:
    list(engine.generate(["theorem go"] * 8, sampling(n=2, max_tokens=200)))
except KeyboardInterrupt:
    print("cancelled")
"""


def test_the_process_ends_cleanly_when_a_cancel_lands_as_the_decoding_thread_starts():
    ended = subprocess.run([sys.executable, "-c", CANCELLED_AS_THE_WORKER_STARTS], cwd=REPO_DIR,
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
