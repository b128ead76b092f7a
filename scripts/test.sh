#!/usr/bin/env bash
# Set up with the test tools (first time only: `scripts/setup.sh test`) and run the whole test suite. Extra
# arguments go to pytest.
# The tests run in one worker per core (pytest-xdist, at most XAIDASH_TEST_WORKERS, default 2), each on one
# thread, a test file per worker at a time (its module fixtures are built once), files in collection order (tests
# marked `long` first: see tests/conftest.py); `-n 0` runs them in this process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 XAIDASH_OFFLINE=1
workers=$(python -c "import os; print(max(1, min(int(os.environ.get('XAIDASH_TEST_WORKERS', 2)), os.cpu_count() or 1)))")
python -m pytest -q --durations=40 -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
