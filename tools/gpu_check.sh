#!/usr/bin/env bash
# The GPU half on a real GPU, for a machine with a CUDA torch and no Docker (this workplace's device
# machine: one H200, Python 3.12, torch with CUDA, PyYAML, no network). Run from the repository root:
#
#   bash tools/gpu_check.sh            # results under $OUT (or ./gpu-results when OUT is unset)
#
# Host mode needs nothing beyond PyYAML (on that machine already) and the standard library: docker-py is
# never imported. Should a dependency be missing there, carry it as a wheel in .whl/ (the device tool's
# README: pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl NAME); this installs it.
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
run gpu-smoke configs/gpu-smoke.yaml
if [ "$gpus" -ge 2 ]; then
  run nccl configs/nccl.yaml
else
  echo "=== nccl (configs/nccl.yaml): not run, it needs 2 GPUs and this machine has $gpus"
fi
exit $status
