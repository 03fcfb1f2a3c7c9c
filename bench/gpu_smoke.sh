#!/usr/bin/env bash
# GPU smoke test of the GRPO step at real model size (a random Qwen2.5-0.5B-shaped model, no downloads) in
# bf16, full fine-tuning and LoRA (peft, through training/lora.py), single GPU first, then ZeRO-2 on every
# visible GPU when deepspeed imports, then (--loop, default auto) the train_grpo loop on the DeepSpeed
# backend, ZeRO-2 and 3, with a kill and resume: the rank-0 rollout/eval broadcast, grad_accum and
# per-rank checkpoints, as tested on CPU (~5 min more on CPU). Prints per phase and arm: rollout tokens/s,
# update tokens/s, the update's MFU (formula in bench/gpu_smoke.py's docstring; peak by GPU name or
# --peak-tflops), peak memory of rollout and update, losses; exits non-zero on NaN/inf or any error.
#
# On the GPU machine, from the repository root (needs python with a CUDA torch; transformers, peft and
# DeepSpeed come from the wheelhouse when missing; vLLM is used where it is installed, with --model):
#   bench/gpu_smoke.sh                          # everything; extra args go to bench/gpu_smoke.py
#   bench/gpu_smoke.sh --steps 2 --deepspeed off --arms lora
#   bench/gpu_smoke.sh --peak-tflops 756       # a GPU not in the script's table (here an H100 PCIe)
#   bench/gpu_smoke.sh --model SmolLM2-135M-Instruct.Q4_1.gguf --deepspeed off --loop off
#                                               # a real model (a HF folder, or a .gguf imported first: needs gguf),
#                                               # prompted through its chat template, rewarded by the math verifier
#                                               # (and, when vllm imports, the same rollouts through the
#                                               # project's vLLM engine in bf16: tokens/s beside HF generate's)
#   WHEELHOUSE=bench/out/wheels bench/gpu_smoke.sh   # first pip-installs missing deps from that folder, offline
# On a dev box with a package index, to prepare that folder (~60 MB with the deepspeed source; give the
# python version of the GPU box; nothing in it is torch):
#   bench/gpu_smoke.sh --make-wheelhouse bench/out/wheels [python-version, default 3.11]
# CPU fallback (what CI-less boxes can check): bench/gpu_smoke.sh --device cpu --tiny
# PYTHON picks the interpreter (default: python3; never the repo's .venv, whose torch is CPU-only).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

# What the smoke imports besides torch (pip resolves their deps; none of them needs torch).
# Our repo itself travels as source.
DEPS=(transformers tokenizers safetensors pydantic psutil pyyaml)
# peft and accelerate declare torch as a dependency: fetched and installed with --no-deps so that pip
# never downloads or replaces a torch (their other deps are in DEPS).
PEFT_DEPS=(peft accelerate)
# DeepSpeed ships as a source archive; built offline with DS_BUILD_OPS=0 against the box's own torch.
DS_DEPS=(setuptools wheel hjson ninja py-cpuinfo msgpack einops psutil packaging numpy tqdm pydantic)

if [ "${1:-}" = "--make-wheelhouse" ]; then
    out="${2:?usage: --make-wheelhouse DIR [python-version]}"
    pyver="${3:-3.11}"
    mkdir -p "$out"
    # Versions pinned to what this repo is tested with (the local .venv), deps resolved by pip.
    pins=()
    for d in "${DEPS[@]}" "${PEFT_DEPS[@]}"; do
        v="$(.venv/bin/python -m pip show "$d" 2>/dev/null | sed -n 's/^Version: //p')"
        pins+=("$d${v:+==$v}")
    done
    n=${#DEPS[@]}
    "$PY" -m pip download -q --only-binary=:all: --python-version "$pyver" -d "$out" "${pins[@]:0:$n}"
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" -d "$out" "${pins[@]:$n}"
    "$PY" -m pip download -q --only-binary=:all: --python-version "$pyver" -d "$out" "${DS_DEPS[@]}"
    "$PY" -m pip download -q --no-deps --no-binary=:all: -d "$out" "deepspeed>=0.16"
    du -sh "$out"
    exit 0
fi

if [ -n "${WHEELHOUSE:-}" ]; then
    echo "[gpu_smoke] installing missing deps from $WHEELHOUSE (offline; torch untouched)"
    before="$("$PY" -c 'import torch; print(torch.__version__)')"
    "$PY" -m pip install -q --no-index --find-links "$WHEELHOUSE" "${DEPS[@]}"
    "$PY" -c 'import peft' 2>/dev/null \
        || "$PY" -m pip install -q --no-index --find-links "$WHEELHOUSE" --no-deps "${PEFT_DEPS[@]}"
    if ls "$WHEELHOUSE"/deepspeed-*.tar.gz >/dev/null 2>&1 && ! "$PY" -c 'import deepspeed' 2>/dev/null; then
        "$PY" -m pip install -q --no-index --find-links "$WHEELHOUSE" "${DS_DEPS[@]}"
        # --no-build-isolation: build against the installed CUDA torch instead of fetching another.
        DS_BUILD_OPS=0 "$PY" -m pip install -q --no-index --find-links "$WHEELHOUSE" --no-build-isolation deepspeed \
            || echo "[gpu_smoke] deepspeed did not build; the ZeRO-2 phase will be skipped"
    fi
    after="$("$PY" -c 'import torch; print(torch.__version__)')"
    [ "$before" = "$after" ] || { echo "[gpu_smoke] pip moved torch $before -> $after; aborting"; exit 4; }
fi

# rlvrflow itself, editable (no deps, no index): its folders import as rlvrflow.<folder> only through an
# install's finder (pyproject's package-dir), and the GPU box has no install of this checkout
if ! "$PY" -c 'import rlvrflow.training' 2>/dev/null; then
    echo "[gpu_smoke] installing this checkout of rlvrflow (editable, no dependencies)"
    "$PY" -m pip install -q --no-deps --no-index --no-build-isolation -e . \
        || { echo "[gpu_smoke] could not install rlvrflow: needs setuptools (in the wheelhouse)" >&2; exit 2; }
fi


# Preflight: say exactly what is missing instead of failing deep inside the run.
"$PY" - <<'EOF'
import importlib.util, sys
missing = [m for m in ("torch", "transformers", "tokenizers", "pydantic", "peft") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"[gpu_smoke] missing modules: {missing}; set WHEELHOUSE (see the top of bench/gpu_smoke.sh)")
import torch
print(f"[gpu_smoke] torch {torch.__version__}, cuda available: {torch.cuda.is_available()}, "
      f"gpus: {torch.cuda.device_count()} {[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}, deepspeed: {importlib.util.find_spec('deepspeed') is not None}")
EOF

exec timeout 1500 "$PY" bench/gpu_smoke.py "$@"
