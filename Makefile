# The two commands of the README, and the docs site. Everything they need is installed by deploy/bootstrap.sh.
.PHONY: run test install docs
# mkdocs-material 9.8 prints a banner about its successor on every build; the build is the same without it.
export NO_MKDOCS_2_WARNING := 1

install:
	deploy/bootstrap.sh

# The docs site first: the platform serves site/ under /docs/, and its pages' help links lead there.
run: install
	.venv/bin/mkdocs build --quiet
	.venv/bin/python -m deploy.stack $(ARGS)

# docs/ (MkDocs, mkdocs.yml) into site/, offline: the theme loads no web fonts and no plugin fetches anything.
# Strict, as `make test` builds it: a broken internal link stops the build here first.
docs: install
	.venv/bin/mkdocs build --strict

# The linter first (pyproject.toml [tool.ruff]: the rules that catch real faults): seconds, before the suite's minutes.
# Then the docs site in strict mode: a broken internal link, a missing page or a page left out of the nav fails
# (never --quiet: it silences the warnings that --strict counts, and the build passes whatever is broken).
# The suite on two workers (pytest-xdist), each with its own PostgreSQL, Redis, Ray head and stand-in
# (tests/services_plugin.py): half its time is spent waiting on processes and services, not computing.
test:
	deploy/bootstrap.sh --browser
	.venv/bin/ruff check .
	.venv/bin/mkdocs build --strict
	.venv/bin/python -m pytest -n 2 $(PYTEST_ARGS)
