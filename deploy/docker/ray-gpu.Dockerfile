# syntax=docker/dockerfile:1.7
# The Ray image: head and GPU workers, with vLLM and the CUDA build of torch, and the trainer.
# Every node of a Ray cluster must run the same Ray and Python versions, so the head uses this
# image too (on a CPU node in Kubernetes). Build from the repository root:
#   docker build -f deploy/docker/ray-gpu.Dockerfile --build-arg CODE_VERSION=$(git rev-parse --short=12 HEAD) \
#     -t lean-rl-ray:0.1.0 .

# Ray's own image: Ray 2.60.0 (requirements.txt's), Python 3.11 (the platform's), CUDA 12.8
# user space; the driver comes from the host through the NVIDIA container toolkit.
FROM rayproject/ray:2.60.0-py311-cu128
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

# What runs plus vLLM and the CUDA build of torch, from the hashed lock (deploy/lock.sh); the same
# transformers as the CPU nodes, and no test tools.
COPY requirements-gpu.lock ./
RUN pip install --require-hashes --no-deps -r requirements-gpu.lock

COPY trainer/ trainer/
COPY platform/runs/cluster.py platform/runs/cluster.py
COPY deploy/ deploy/

ARG CODE_VERSION=unknown
ENV PLATFORM_CODE_VERSION=${CODE_VERSION} \
    PYTHONPATH=/app \
    ARTIFACTS_DIR=/data/artifacts \
    HF_HOME=/data/hf-cache
