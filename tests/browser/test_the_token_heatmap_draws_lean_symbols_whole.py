"""The proof viewer's token heatmap draws ℚ, ℝ, ∀ and → as themselves (issue 45): a character whose bytes the
tokenizer split over tokens is drawn once, one span over its tokens, whose figures the readout lists token by token;
never a replacement character. The records are written as the trainer writes them (token_records.write_step_records
with TokenTexts over SmolLM2's own tokenizer), for a trained answer stored in PostgreSQL."""

import pytest

from tests.browser.conftest import log_in
from trainer.learning.models import smollm2_tokenizer
from trainer.observability import token_records

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANSWER = "theorem q : (1 : ℚ) + 1 = 2 ∧ ∀ x : ℝ, x ∈ Set.univ → 0 ≤ x ^ 2 := by\n  norm_num"


def test_an_answer_with_lean_symbols_is_drawn_with_each_symbol_whole(page, alice, make_run):
    from proofs.models import ProofAttempt

    tokenizer = smollm2_tokenizer()
    ids = tokenizer.encode(ANSWER, add_special_tokens=False)
    run = make_run(state="running")
    attempt = ProofAttempt.objects.create(run=run, rollout_key="a1-s1-p0-r0", step=1, problem_key="q", reward=1.0,
                                          verdict="valid", response=ANSWER, num_tokens=len(ids))
    figures = [-0.1 * (index % 7) for index in range(len(ids))]
    token_records.write_step_records(run.artifacts_dir, 1, 1, [token_records.TokenRecord(
        attempt.rollout_key, 0.5, ids, figures, figures, [0.5] * len(ids), [1.0] * len(ids), [0] * len(ids))],
        token_records.TokenTexts(tokenizer))

    log_in(page, "alice", "alice-password")
    page.goto(f"/proofs/{attempt.pk}/")
    page.wait_for_selector("#token-view[data-tokens='drawn']")
    drawn = page.eval_on_selector_all("#tokens .token", "spans => spans.map(s => [s.textContent, Number(s.dataset.tokens)])")

    assert "".join(text for text, _ in drawn) == ANSWER
    assert "\ufffd" not in page.inner_text("#tokens")
    assert sum(count for _, count in drawn) == len(ids)  # every token drawn, each once
    for symbol in "ℚℝ∀→":
        assert sum(text.count(symbol) for text, _ in drawn) == 1, f"{symbol} is not drawn once"
    joined = [(text, count) for text, count in drawn if count > 1]
    assert any("ℚ" in text for text, _ in joined), f"ℚ's bytes span no tokens here: {drawn}"
    assert page.inner_text("#token-status").startswith(f"{len(ids)} tokens")

    text, count = next((text, count) for text, count in joined if "ℚ" in text)
    page.hover(f"#tokens .token-joined:has-text('{text}')")
    page.wait_for_selector("#token-readout .token-joined-note")
    assert page.locator("#token-readout dd[data-figure='learner_logprob']").count() == count
