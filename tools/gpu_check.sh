#!/usr/bin/env bash
# The GPU half on a real GPU, for a machine with a CUDA torch and no Docker (this workplace's device
# machine: one H200, Python 3.12, torch with CUDA, PyYAML, no network). Run from the repository root:
#
#   bash tools/gpu_check.sh            # results under $OUT (or ./gpu-results when OUT is unset)
#
# Host mode needs PyYAML (on that machine already), cryptography (distval's command line imports attest's signing;
# missing there: carry it) and the standard library: docker-py is never imported. Carry the missing ones as wheels in
# .whl/ (git-ignored via .git/info/exclude; the device tool's `carry`):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl cryptography cffi pycparser
# and this installs them.
# It runs, in host mode with the machine's own torch: the CUDA build identity, NCCL with one rank per GPU,
# gloo with two ranks on one GPU (configs/gpu-smoke.yaml), and configs/nccl.yaml when there are >= 2 GPUs.
set -uo pipefail
out=${OUT:-gpu-results}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/distval-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/distval-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
# NCCL then says it took this variable from the environment ("set by environment to", its ENV subsystem): the JSON
# report's nccl_set_by_environment property (distval/results/nccl_environment.py) on a real NCCL.
export NCCL_SOCKET_IFNAME=lo

echo "=== machine"
nvidia-smi -L 2>&1 | tee "$out/nvidia-smi.txt"
python3 - <<'PY' 2>&1 | tee "$out/torch.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())
try:
    print("nccl", torch.cuda.nccl.version(), "cudnn", torch.backends.cudnn.version())
except Exception as exc:  # noqa: BLE001 - a report, not a check
    print("nccl/cudnn version:", type(exc).__name__, exc)
PY
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')

status=0
run() {  # name config [extra args]
  local name=$1 config=$2
  shift 2
  echo "=== $name ($config)"
  python3 -m distval run --local "$config" --python python3 --require-gpu \
    --junit "$out/$name.xml" --json "$out/$name.json" --markdown "$out/$name.md" "$@" 2>&1 | tee "$out/$name.log"
  local code=${PIPESTATUS[0]}
  echo "=== $name: exit $code"
  [ "$code" -eq 0 ] || status=1
}
# NCCL's own report of what it took from the environment, on this machine's NCCL, read by distval's parser (a
# one-rank scenario creates no communicator, so the run's nccl_set_by_environment says "none reported").
echo "=== NCCL set by environment"
NCCL_DEBUG=INFO python3 -c 'import torch; torch.cuda.nccl.unique_id()' > "$out/nccl-env.log" 2>&1
python3 -c 'import sys; from distval.results.nccl_environment import describe, set_by_environment; print("parsed:", describe(set_by_environment([open(sys.argv[1]).read()])))' "$out/nccl-env.log"
grep "set by environment" "$out/nccl-env.log"
run gpu-smoke configs/gpu-smoke.yaml
if [ "$gpus" -ge 2 ]; then
  run nccl configs/nccl.yaml
else
  echo "=== nccl (configs/nccl.yaml): not run, it needs 2 GPUs and this machine has $gpus"
fi
exit $status
