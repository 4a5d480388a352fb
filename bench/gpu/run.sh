#!/bin/bash
# The GPU runner, from the repository root on the GPU machine: bash bench/gpu/run.sh JOB [ARGS...]
# Assembles what JOB needs (bench/gpu/carry.py says which carried wheels: a tar in parts, a folder of
# wheels, or the machine's own CuPy and CUDA only), then runs its steps, bench/gpu/jobs/JOB.sh.
# Reports and logs.txt land in $OUT (default gpu-JOB-out). `bash bench/gpu/run.sh --gather` only
# keeps the wheel parts this call carried, for the call that carries the last one.
set -u
R=$(pwd)
HERE=$R/bench/gpu
. "$HERE/lib.sh"
if [ "${1:-}" = "--gather" ]; then gather_parts; exit 0; fi
JOB=${1:?usage: bash bench/gpu/run.sh JOB [ARGS...] (python3 bench/gpu/carry.py lists them)}; shift
WHEELS=$(python3 "$HERE/carry.py" wheels "$JOB") || exit 2
OUT=${OUT:-$R/gpu-$JOB-out}; mkdir -p "$OUT"; export OUT
exec > >(tee -a "$OUT/logs.txt") 2>&1

step "assemble: $JOB"
case $WHEELS in
  parts) gather_parts
         SET_ID=$(cut -c1-64 /tmp/parts/SUM)
         installed "$SET_ID" || { unpack_parts; install_site /tmp/w "$SET_ID"; } ;;
  dir)   install_site .whl/w "$(cat .whl/w/*.whl | sha256sum | cut -c1-64)" ;;
esac
runtime_package
if [ "$WHEELS" != none ]; then use_site; spill_dir; fi
. "$HERE/jobs/$JOB.sh" "$@"
