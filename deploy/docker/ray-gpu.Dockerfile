# syntax=docker/dockerfile:1.7
# The Ray image: head and GPU workers, with vLLM and the CUDA build of torch, and the trainer.
# Every node of a Ray cluster must run the same Ray and Python versions, so the head uses this
# image too (on a CPU node in Kubernetes). Build from the repository root:
#   docker build -f deploy/docker/ray-gpu.Dockerfile --build-arg CODE_VERSION=$(git rev-parse --short=12 HEAD) \
#     -t lean-rl-ray:0.1.0 .

# Ray's own image: Ray 2.60.0 (requirements.txt's), Python 3.11 (the platform's). Its CUDA 12.8
# libraries are not what the trainer runs on: torch 2.13.0, vLLM 0.32.0 and NCCL come from
# requirements-gpu.lock with their own CUDA 13.0 user space as wheels (nvidia-cuda-runtime 13.0.96,
# nvidia-cublas 13.1, nvidia-cudnn-cu13 9.20, nvidia-nccl-cu13 2.29.7). The driver comes from the host
# through the NVIDIA container toolkit, and CUDA 13.0 needs NVIDIA driver 580 or newer on every GPU node:
# with an older one torch sees no GPU, and a run asking for GPUs fails at start saying so.
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
# The CUDA user space the lock really pins, checked at build time (no GPU is needed to read it).
RUN python -c "import torch, sys; sys.exit(0 if (torch.version.cuda or '').startswith('13.') else f'torch {torch.__version__} is built for CUDA {torch.version.cuda}, not the lock\'s 13.0')"

COPY trainer/ trainer/
COPY platform/runs/cluster.py platform/runs/cluster.py
COPY deploy/ deploy/

ARG CODE_VERSION=unknown
ENV PLATFORM_CODE_VERSION=${CODE_VERSION} \
    PYTHONPATH=/app \
    ARTIFACTS_DIR=/data/artifacts \
    HF_HOME=/data/hf-cache
