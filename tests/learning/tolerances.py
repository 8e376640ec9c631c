"""How close float32 log-probs and gradients computed in another order must be."""


def assert_within_its_scale(got, expected, name, tolerance=1e-5):
    # Relative to the tensor's largest entry: float32 sums taken in another order (per chunk,
    # per packed row) differ by a few ulps of the largest terms, not of each small entry.
    error = (got - expected).abs().max().item()
    scale = expected.abs().max().item()
    assert error <= tolerance * scale, f"{name}: largest difference {error:.3g} against entries up to {scale:.3g}"
