#!/usr/bin/env bash
# Lint and type-check (run by .ci/run before the tests): ruff's rules and formatting over everything,
# mypy over the xaidash packages and the benchmarks. Extra arguments go to mypy.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
ruff check .
ruff format --check .
# mypy cannot follow setuptools' editable-install hook: give it the installed layout, xaidash/<layer>,
# as links to the repository's folders (see [tool.mypy] in pyproject.toml).
links=.cache/typecheck/xaidash
mkdir -p "$links"
for layer in data models explainers dashboard; do ln -sfn "../../../$layer" "$links/$layer"; done
mypy "$links" bench "$@"
