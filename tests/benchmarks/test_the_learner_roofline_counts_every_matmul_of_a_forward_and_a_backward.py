"""The learner roofline's arithmetic (benchmarks/learner_roofline.py): which linear layers a pass of the model runs,
and the FLOPs of a forward and of a forward with its backward, on SmolLM2-135M's shape and hand-made numbers."""

from types import SimpleNamespace

from benchmarks.learner_roofline import linear_shapes, pass_flops

SMOLLM2 = SimpleNamespace(num_attention_heads=9, num_key_value_heads=3, hidden_size=576, intermediate_size=1536,
                          num_hidden_layers=30, vocab_size=49152)


def test_a_pass_runs_each_layers_seven_projections_and_the_head_once():
    shapes = {(s.k, s.n): (s.count, s.is_head) for s in linear_shapes(SMOLLM2)}
    assert shapes == {(576, 576): (60, False), (576, 192): (60, False), (576, 1536): (60, False),
                      (1536, 576): (30, False), (576, 49152): (1, True)}


def test_a_backward_is_two_more_matmuls_of_each_forwards_size_and_the_head_runs_on_response_tokens_only():
    tiny = SimpleNamespace(num_attention_heads=2, num_key_value_heads=1, hidden_size=4, intermediate_size=8,
                           num_hidden_layers=1, vocab_size=10)
    layer = 4 * 4 + 4 * 2 + 4 * 2 + 4 * 4 + 3 * 4 * 8  # query, key, value, output, gate, up, down: k × n each
    forward = pass_flops(linear_shapes(tiny), tokens=100, response_tokens=30, backward=False)
    assert forward == 2 * (100 * layer + 30 * 4 * 10)
    assert pass_flops(linear_shapes(tiny), tokens=100, response_tokens=30, backward=True) == 3 * forward
