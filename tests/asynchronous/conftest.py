from tests.learning.conftest import smollm2_tokenizer_once, tiny_policy  # noqa: F401 - fixtures shared with the learner's tests
