"""``LiveRollouts`` (trainer/observability/live.py): the first piece as soon as there is text, then at most one per interval;
at most N answers at once; a character cut by a token boundary waits for its end; a failing publish costs
only the piece."""

from __future__ import annotations

from trainer.observability.live import LiveRollouts


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def live(pieces, clock, *, interval_s=0.5, max_rollouts=8, publish=None):
    return LiveRollouts(publish or pieces.append, lambda p, s: (f"k{p}-{s}", 3, f"problem{p}", "first"),
                        interval_s=interval_s, max_rollouts=max_rollouts, clock=clock)


def test_the_first_piece_goes_at_once_and_the_next_not_before_the_interval():
    pieces, clock = [], Clock()
    rollouts = live(pieces, clock)
    rollouts.update(0, 0, 1, lambda: "")
    assert pieces == []  # no text yet: nothing to show
    rollouts.update(0, 0, 2, lambda: "Hello")
    clock.now += 0.3
    rollouts.update(0, 0, 3, lambda: "Hello wor")
    clock.now += 0.3
    rollouts.update(0, 0, 4, lambda: "Hello world")
    assert [(p.offset, p.text, p.tokens) for p in pieces] == [(0, "Hello", 2), (5, " world", 4)]
    rollouts.finish(0, 0, "Hello world!", 5)
    assert (pieces[-1].offset, pieces[-1].text, pieces[-1].is_finished) == (11, "!", True)
    assert (pieces[-1].rollout_key, pieces[-1].step, pieces[-1].problem_id) == ("k0-0", 3, "problem0")


def test_a_character_cut_by_a_token_boundary_and_a_trailing_space_wait_for_what_follows():
    pieces, clock = [], Clock()
    rollouts = live(pieces, clock, interval_s=0.0)
    rollouts.update(0, 0, 1, lambda: "x ≤\ufffd")  # the decoder's U+FFFD: half of the next character
    rollouts.update(0, 0, 2, lambda: "x ≤ ℕ .")
    assert [(p.offset, p.text) for p in pieces] == [(0, "x ≤"), (3, " ℕ .")]  # offsets in code points


def test_no_more_than_the_cap_stream_at_once_and_a_freed_place_goes_to_another():
    pieces, clock = [], Clock()
    rollouts = live(pieces, clock, max_rollouts=2)
    for prompt in range(3):
        rollouts.update(prompt, 0, 1, lambda: "a")
    assert sorted(p.rollout_key for p in pieces) == ["k0-0", "k1-0"]
    rollouts.finish(0, 0, "ab", 2)
    clock.now += 1
    rollouts.update(2, 0, 5, lambda: "abcde")
    assert pieces[-1].rollout_key == "k2-0" and (pieces[-1].offset, pieces[-1].text) == (0, "abcde")


def test_an_answer_whose_decode_changes_what_was_sent_streams_no_more_rather_than_contradict_itself():
    pieces, clock = [], Clock()
    rollouts = live(pieces, clock, interval_s=0.0)
    rollouts.update(0, 0, 1, lambda: "abc")
    rollouts.update(0, 0, 2, lambda: "abX d")
    rollouts.finish(0, 0, "abX def", 3)
    assert [(p.text, p.is_finished) for p in pieces] == [("abc", False), ("", True)]


def test_a_failing_publish_drops_the_piece_and_generation_goes_on(capsys):
    clock = Clock()

    def refuse(piece):
        raise ConnectionError("Redis went away")

    rollouts = live([], clock, publish=refuse)
    rollouts.update(0, 0, 1, lambda: "text")
    rollouts.finish(0, 0, "text", 1)
    assert "dropped a piece of k0-0" in capsys.readouterr().err


def test_an_answer_that_ends_before_its_first_piece_is_one_finished_piece_within_the_cap():
    pieces, clock = [], Clock()
    rollouts = live(pieces, clock, max_rollouts=1)
    rollouts.finish(0, 0, "done at once", 1)
    rollouts.update(1, 0, 1, lambda: "a")
    rollouts.finish(2, 0, "over the cap", 1)  # answer 1 holds the only place
    assert [(p.rollout_key, p.offset, p.text, p.is_finished) for p in pieces] == [
        ("k0-0", 0, "done at once", True), ("k1-0", 0, "a", False)]


def test_incremental_decoding_gives_the_whole_decode_and_waits_for_a_characters_last_byte():
    from trainer.observability.live import IncrementalDecoder

    data = "x ≤ 𝔽 y".encode()  # one token per byte: 𝔽 takes four
    decode = lambda ids: bytes(ids).decode("utf-8", errors="replace")
    decoder = IncrementalDecoder(decode)
    seen = [decoder.text("answer", list(data[:end])) for end in range(1, len(data) + 1)]
    assert seen[-1] == "x ≤ 𝔽 y"
    assert all(decode(list(data[:end])) == text for end, text in enumerate(seen, start=1))
