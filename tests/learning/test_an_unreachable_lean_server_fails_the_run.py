"""A Lean server that does not answer ends the run as failed with the reason, at start-up or mid-run."""

from __future__ import annotations

import copy

from deploy.services import free_port
from tests.learning.conftest import CannedAnswersEngine, tiny_run_config
from tests.learning.test_driver_events import PROBLEMS, answer_for
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.verification.standin_server import StandinServerThread


def run_with(verifier_url, tmp_path, tokenizer, engine_factory=None, total_steps=1):
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer))
    sink = ListSink()
    config = tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 3, "max_response_tokens": 64},
        optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 3},
        schedule={"total_steps": total_steps, "eval_every": 0, "checkpoint_every": 0},
        # No verdict cache: the same canned proofs every step must reach the server each time.
        verifier={"url": verifier_url, "timeout_s": 5, "max_retries": 0, "cache_size": 0},
    )
    engine = (engine_factory or (lambda tok: CannedAnswersEngine(tok, answer_for)))(tokenizer)
    status = TrainingRun(config, PROBLEMS, tmp_path, EventPublisher("r", sink), model=model,
                         tokenizer=tokenizer, engine=engine).run()
    return status, sink


def test_a_server_that_is_down_at_start_fails_the_run_before_any_step(tmp_path, smollm2_tokenizer_once):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    status, sink = run_with(url, tmp_path, smollm2_tokenizer_once)
    assert status is RunStatus.FAILED
    [finished] = sink.of_type(EventType.RUN_FINISHED)
    assert f"the Lean server at {url} does not answer" in finished.payload["reason"]
    assert sink.of_type(EventType.STEP_STARTED) == []


def test_a_server_that_goes_away_mid_run_fails_the_run_instead_of_training_on_nothing(tmp_path, smollm2_tokenizer_once):
    server = StandinServerThread()
    server.__enter__()
    stopped = []

    class StopsTheServerAfterStepOne(CannedAnswersEngine):
        def generate(self, prompts, sampling):
            if self.calls_before_stop == 0 and not stopped:
                server.__exit__(None, None, None)
                stopped.append(True)
            self.calls_before_stop -= 1
            yield from super().generate(prompts, sampling)

    def engine(tokenizer):
        e = StopsTheServerAfterStepOne(tokenizer, answer_for)
        e.calls_before_stop = 1
        return e

    try:
        status, sink = run_with(server.url, tmp_path, smollm2_tokenizer_once, engine, total_steps=3)
    finally:
        if not stopped:
            server.__exit__(None, None, None)
    assert status is RunStatus.FAILED
    [finished] = sink.of_type(EventType.RUN_FINISHED)
    assert "does not answer its /health check" in finished.payload["reason"]
    assert [e.payload["step"] for e in sink.of_type(EventType.METRICS)] == [1]
