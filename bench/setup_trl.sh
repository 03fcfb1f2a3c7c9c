#!/usr/bin/env bash
# Create .venv-trl for the training benchmark's peer (bench/trl_grpo.py): the same CPU torch as .venv,
# then TRL, then rlvrflow with its dependencies. TRL lives apart so it can never move the main pins.
# Idempotent: a stamp keyed on pyproject.toml skips the pip steps when nothing changed.
# Usage: bench/setup_trl.sh            (~3-5 min the first time)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"   # the CPU wheel first, so nothing later pulls a CUDA build

[ -x .venv-trl/bin/python ] || "$PY" -m venv .venv-trl
stamp=".venv-trl/.rlvrflow-installed"
want="$(sha256sum pyproject.toml | cut -c1-16)-$TORCH_SPEC"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "[setup_trl] .venv-trl up to date"; exit 0
fi
pip_() { .venv-trl/bin/python -m pip "$@"; }
torch_version() { .venv-trl/bin/python -c 'import torch; print(torch.__version__)'; }

pip_ install -q --upgrade pip
pip_ install -q "$TORCH_SPEC"
before="$(torch_version)"
pip_ install -q ".[trl]"     # rlvrflow (non-editable; the bench puts the working tree first on sys.path) + TRL
after="$(torch_version)"
if [ "$before" != "$after" ]; then
    echo "[setup_trl] pip moved torch from $before to $after; pin TRL to a release that accepts torch $before" >&2
    exit 1
fi
.venv-trl/bin/python -c 'import trl, torch, transformers; print(f"[setup_trl] trl {trl.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")'
echo "$want" > "$stamp"
