# The two commands of the README. Everything they need is installed by deploy/bootstrap.sh.
.PHONY: run test install

install:
	deploy/bootstrap.sh

run: install
	.venv/bin/python -m deploy.stack $(ARGS)

# The linter first (pyproject.toml [tool.ruff]: the rules that catch real faults): seconds, before the suite's minutes.
# The suite on two workers (pytest-xdist), each with its own PostgreSQL, Redis, Ray head and stand-in
# (tests/services_plugin.py): half its time is spent waiting on processes and services, not computing.
test:
	deploy/bootstrap.sh --browser
	.venv/bin/ruff check .
	.venv/bin/python -m pytest -n 2 $(PYTEST_ARGS)
