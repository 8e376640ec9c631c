# syntax=docker/dockerfile:1.7
# The platform image: web (ASGI), Celery worker, event ingester and migrations, on CPU.
# Build from the repository root:
#   docker build -f deploy/docker/platform.Dockerfile --build-arg CODE_VERSION=$(git rev-parse --short=12 HEAD) \
#     -t lean-rl-platform:0.1.0 .

FROM node:22.20.0-bookworm-slim AS frontend
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

# The docs site (`make docs`), which the platform serves under /docs/ and its pages' help links lead to: MkDocs,
# its theme and pydantic alone, from the hashed lock (deploy/lock_subset.py), built strict as `make test` builds it.
FROM python:3.11.7-slim-bookworm AS docs
WORKDIR /src
COPY requirements-dev.lock deploy/lock_subset.py deploy/docs-packages.txt ./
RUN python lock_subset.py requirements-dev.lock docs-packages.txt > docs.lock \
 && pip install --no-cache-dir --require-hashes --no-deps -r docs.lock
COPY mkdocs.yml ./
COPY docs/ docs/
COPY trainer/ trainer/
RUN NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --site-dir /site

FROM python:3.11.7-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --create-home --uid 10001 leanrl
WORKDIR /app

# What runs, from the hashed lock (deploy/lock.sh), no test tools: the CPU build of torch
# (2.13.0+cpu, from PyTorch's own index) so that no multi-gigabyte CUDA build lands on machines
# that never see a GPU.
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps --find-links https://download.pytorch.org/whl/cpu/torch/ \
      -r requirements.lock

COPY manage.py ./
COPY platform/ platform/
COPY trainer/ trainer/
# The command-line client beside the server it drives: `python -m leanrl` runs in this image.
COPY leanrl/ leanrl/
COPY deploy/ deploy/
COPY frontend/templates/ frontend/templates/
COPY frontend/static/ frontend/static/
COPY --from=frontend /src/frontend/dist/ frontend/dist/
# settings.DOCS_SITE_DIR: the checkout's site/, here /app/site.
COPY --from=docs /site/ site/

ARG CODE_VERSION=unknown
# PLATFORM_CODE_VERSION is what a run records as the code it ran with (runs/cluster.py).
ENV PLATFORM_CODE_VERSION=${CODE_VERSION} \
    PYTHONPATH=/app/platform:/app \
    DJANGO_SETTINGS_MODULE=config.settings \
    STATIC_ROOT=/app/var/static \
    ARTIFACTS_DIR=/data/artifacts
RUN python manage.py collectstatic --noinput \
 && mkdir -p /data/artifacts && chown -R leanrl /data

USER leanrl
EXPOSE 8000
# X-Forwarded-* is trusted only from FORWARDED_ALLOW_IPS (uvicorn's default: 127.0.0.1), the proxy.
CMD ["uvicorn", "config.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--proxy-headers"]
