"""The trainer's lifecycle tests borrow the learner tests' tiny policy."""

from tests.learning.conftest import smollm2_tokenizer_once  # noqa: F401 - a fixture
