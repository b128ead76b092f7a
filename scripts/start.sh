#!/usr/bin/env bash
# Set up (first time only) and start the dashboard on http://127.0.0.1:8501 with the built-in, offline data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
exec xaidash serve "$@"
