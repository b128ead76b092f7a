#!/usr/bin/env bash
# Set up (first time only: several minutes, each step printed with its time) and start the dashboard on
# http://127.0.0.1:8501. The built-in data sets work offline; downloads (pretrained weights, other data sets) follow
# your own setting: export XAIDASH_OFFLINE=1 (or HF_HUB_OFFLINE=1) to turn them off.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
echo "xaidash: starting the dashboard (the first page takes a few seconds to load torch)..." >&2
exec xaidash serve "$@"
