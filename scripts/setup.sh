#!/usr/bin/env bash
# Create .venv at the repository root and install rlvrflow with its test extras.
# Idempotent: a stamp file keyed on pyproject.toml skips the pip step when nothing changed.
# Usage: scripts/setup.sh [extra ...]   (default extras: dev)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${*:-dev}"
extras="${extras// /,}"
PY="${PYTHON:-python3}"

# bubblewrap is the code verifier's sandbox; install it where we can (root + apt), else say so.
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "[setup] installing bubblewrap (apt-get)"
        (apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null; }) \
            || echo "[setup] WARNING: could not install bubblewrap; sandboxed code tests will be skipped"
    else
        echo "[setup] WARNING: bubblewrap (bwrap) not found; install it with your package manager (e.g. apt-get install bubblewrap)"
    fi
fi

# chromium: the headless browser in which tests/flows/test_prefect_server.py opens the Prefect UI's
# artifact pages (driven by playwright, from the dev extra) to see that the run's figures load.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing chromium (apt-get; about 2 minutes)"
    (apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; }) \
        || echo "[setup] WARNING: could not install chromium; the Prefect UI check will fail"
fi

if [ ! -x .venv/bin/python ]; then
    echo "[setup] creating .venv"
    "$PY" -m venv .venv
fi
stamp=".venv/.rlvrflow-installed"
want="$(cat pyproject.toml | sha256sum | cut -c1-16)-$extras"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "[setup] .venv up to date"
    exit 0
fi
echo "[setup] installing rlvrflow[$extras] into .venv (first time: ~3-5 min)"
.venv/bin/python -m pip install -q --upgrade pip
# The CPU torch wheel first, pinned, so nothing later pulls a CUDA build.
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[$extras]"
echo "$want" > "$stamp"
echo "[setup] done"
