"""The roofline benchmark's arithmetic (benchmarks/generation_roofline.py): which matmuls one decoding step
runs, how many bytes of keys and values it reads, and the tokens/s bound they give, on hand-made numbers."""

import pytest

from benchmarks.generation_roofline import DecoderShape, cache_bytes_per_step, decode_bound, decode_matmuls, weight_bytes

# SmolLM2-135M: 30 layers, hidden 576, MLP 1536, 9 query heads and 3 key/value heads of 64, 49,152 words.
SMOLLM2 = DecoderShape(layers=30, hidden=576, intermediate=1536, heads=9, kv_heads=3, head_size=64, vocab=49152)


def test_a_step_runs_each_layers_seven_projections_and_the_head_once():
    matmuls = {(m.k, m.n): m for m in decode_matmuls(SMOLLM2, batch=16)}
    assert {shape: m.count for shape, m in matmuls.items()} == {
        (576, 576): 60,  # query and output
        (576, 192): 60,  # key and value
        (576, 1536): 60,  # gate and up
        (1536, 576): 30,  # down
        (576, 49152): 1,  # the head
    }
    assert all(m.batch == 16 for m in matmuls.values())


def test_the_weights_counted_are_smollm2s_linear_weights_and_head():
    per_layer = 2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536
    assert weight_bytes(decode_matmuls(SMOLLM2, batch=1), dtype_bytes=2) == 2 * (30 * per_layer + 576 * 49152)


def test_the_cache_read_is_keys_and_values_of_every_layer_for_every_answer():
    # 2 × 30 layers × 3 heads × 64 × 100 tokens × 16 answers × 2 bytes
    assert cache_bytes_per_step(SMOLLM2, batch=16, mean_context=100, dtype_bytes=2) == 2 * 30 * 3 * 64 * 100 * 16 * 2


def test_the_bound_is_the_batch_over_the_timed_matmuls_plus_the_cache_read():
    shape = DecoderShape(layers=2, hidden=4, intermediate=8, heads=2, kv_heads=1, head_size=2, vocab=10)
    matmuls = decode_matmuls(shape, batch=8)
    assert [(m.name, m.count) for m in matmuls] == [("query+output", 4), ("key+value", 4), ("gate+up", 4),
                                                    ("down", 2), ("head", 1)]
    timings = {"query+output": 1e-3, "key+value": 0.5e-3, "gate+up": 2e-3, "down": 2e-3, "head": 4e-3}
    bound = decode_bound(8, timings, matmuls, cache_bytes=1e6, weight_bytes_per_step=3e6, bandwidth_bytes_per_s=1e9)
    # 4·1 + 4·0.5 + 4·2 + 2·2 + 1·4 = 22 ms of matmuls, plus 1 MB at 1 GB/s = 1 ms
    assert bound.step_seconds == pytest.approx(23e-3)
    assert bound.tokens_per_s == pytest.approx(8 / 23e-3)
    assert bound.weight_streaming_tokens_per_s == pytest.approx(8 * 1e9 / 4e6)


def test_a_head_the_same_shape_as_a_layer_is_counted_with_it_not_lost():
    shape = DecoderShape(layers=3, hidden=4, intermediate=8, heads=2, kv_heads=2, head_size=2, vocab=4)
    counts = {(m.k, m.n): m.count for m in decode_matmuls(shape, batch=1)}
    assert counts[(4, 4)] == 3 * 4 + 1  # query, key, value, output of 3 layers and the head


def test_a_timing_missing_for_a_shape_is_refused_with_its_name():
    with pytest.raises(ValueError, match="no timing for the matmuls head"):
        decode_bound(1, {"query+output": 1.0, "key+value": 1.0, "gate+up": 1.0, "down": 1.0},
                     decode_matmuls(SMOLLM2, 1), 0.0, 1.0, 1.0)


def test_no_answer_in_flight_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        decode_matmuls(SMOLLM2, batch=0)
