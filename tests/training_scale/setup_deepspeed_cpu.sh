#!/usr/bin/env bash
# Create .venv-ds: a throwaway venv that sees the main .venv's packages (torch, transformers) through a
# .pth file and adds DeepSpeed built without CUDA ops (DS_BUILD_OPS=0), for the slow 2-rank CPU test
# (tests/training_scale/test_deepspeed_cpu.py). DeepSpeed never enters the main .venv.
# Usage: tests/training_scale/setup_deepspeed_cpu.sh     (needs .venv from scripts/setup.sh; ~40 s; `make test` runs it)
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x .venv/bin/python ] || { echo "run scripts/setup.sh first (.venv is missing)"; exit 1; }
main_site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ -x .venv-ds/bin/python ] && .venv-ds/bin/python -c "import deepspeed, rlvrflow.training" >/dev/null 2>&1; then
    echo "[setup] .venv-ds has deepspeed and rlvrflow"; exit 0
fi
[ -x .venv-ds/bin/python ] || .venv/bin/python -m venv .venv-ds
ds_site="$(.venv-ds/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$main_site" > "$ds_site/zz_rlvrflow_main_venv.pth"   # zz: sorts last, so .venv-ds's own packages win
.venv-ds/bin/python -m pip install -q wheel setuptools
# --no-build-isolation: DeepSpeed's setup.py imports torch; isolation would download a second (CUDA) torch.
.venv-ds/bin/python -c "import deepspeed" >/dev/null 2>&1 ||
    DS_BUILD_OPS=0 DS_ACCELERATOR=cpu .venv-ds/bin/python -m pip install -q --no-build-isolation "deepspeed>=0.16"
# rlvrflow itself, editable: the folders map into the rlvrflow package only through the install's own
# finder (pyproject's package-dir), which the main venv's .pth line above does not bring along
.venv-ds/bin/python -m pip install -q --no-deps --no-build-isolation -e .
.venv-ds/bin/python -c "import deepspeed, torch, rlvrflow.training; print('deepspeed', deepspeed.__version__, 'torch', torch.__version__)"
