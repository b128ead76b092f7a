#!/usr/bin/env bash
# Set up (first time only) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 XAIDASH_OFFLINE=1
python -m pytest -q --durations=15 "$@"
