# The two commands of the README. Everything they need is installed by deploy/bootstrap.sh.
.PHONY: run test install

install:
	deploy/bootstrap.sh

run: install
	.venv/bin/python -m deploy.stack $(ARGS)

test:
	deploy/bootstrap.sh --browser
	.venv/bin/python -m pytest $(PYTEST_ARGS)
