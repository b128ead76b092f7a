#!/usr/bin/env bash
# Every GPU benchmark in one call, each under its own time limit, for a machine lent for a short while
# (docs/performance.md, "On a GPU"). Logs go to $1 (default bench-gpu/), one per benchmark.
# Packages the machine lacks travel as wheels in .whl/ (docs/development.md says how to fetch them);
# MNIST is read from $XAIDASH_DATA.
set -u
out="${1:-bench-gpu}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
# The four top-level folders as the xaidash namespace, without installing the project.
mkdir -p /tmp/imp/xaidash
for layer in data models explainers dashboard; do ln -sfn "$PWD/$layer" "/tmp/imp/xaidash/$layer"; done
export PYTHONPATH="/tmp/imp:$PYTHONPATH" PYTHONUNBUFFERED=1 XAIDASH_OFFLINE=1 HF_HUB_OFFLINE=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc
  python3 -c "import torch, captum, shap, lime, zennit; print(torch.__version__, torch.cuda.get_device_name(0))"
} >"$out/env.txt" 2>&1
bench() {  # LIMIT NAME ARGS...: one benchmark, stopped at LIMIT seconds
  local limit=$1 name=$2; shift 2
  case ",${BENCHES:-$name}," in *",$name,"*) ;; *) return ;; esac  # BENCHES=a,b runs only those
  local start=$SECONDS
  timeout --kill-after=5 "$limit" python3 "bench/$name.py" "$@" >"$out/$name.log" 2>&1
  echo "exit $? after $((SECONDS - start)) s (limit $limit s)" >>"$out/$name.log"
}
bench 170 explain_speed --device cuda ${EXPLAIN_METHODS:+--methods "$EXPLAIN_METHODS"}
bench 170 train_speed --epochs 3 --device cuda ${XAIDASH_DATA:+--shared-data "$XAIDASH_DATA"}
bench 60 metrics_speed --n 64 --device cuda
bench 40 text_explain_speed --device cuda
bench 50 influence_speed --device cuda
bench 90 projection_speed --n 70000 --methods umap
