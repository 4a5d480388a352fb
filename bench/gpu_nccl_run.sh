#!/bin/bash
# NCCL pruned on a real GPU (an sm_90 H200, no network), from the repo root: the machine's own
# libnccl (its CUDA 13 wheel) copied and pruned by the builder's stage (python -m
# rapidship.builder.prune, cuobjdump-checked) to sm_90, and to sm_80 only for the negative case;
# bench/gpu_nccl_job.py runs NCCL's collectives with each (LD_PRELOAD) and checks them exactly.
# Reports land in $OUT (nccl-*.json, prune-nccl-*.json, logs.txt).
R=$(pwd)
OUT=${OUT:-$R/gpu-nccl-out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/logs.txt") 2>&1
set -u
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv
SITE=$(python3 -c "import cupy, os; print(os.path.dirname(os.path.dirname(cupy.__file__)))")
NCCL=$(find "$SITE/nvidia" -name 'libnccl.so.2' | head -1)
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
echo "libnccl: $NCCL ($(stat -c %s "$NCCL") bytes); cuobjdump: $CUOBJDUMP"
for keep in 90 80; do
  mkdir -p /tmp/nccl-$keep && cp "$NCCL" /tmp/nccl-$keep/
  PYTHONPATH=$R/src python3 -m rapidship.builder.prune --keep $keep --cuobjdump "$CUOBJDUMP" \
    --record "$OUT/prune-nccl-$keep.json" /tmp/nccl-$keep/libnccl.so.2 | tail -2
  python3 -c "import json; f=json.load(open('$OUT/prune-nccl-$keep.json'))['files'][0]; print('keep $keep:', f['status'], f['bytes_before'], '->', f['bytes_after'], f.get('reason',''))"
done
python3 bench/gpu_nccl_job.py --label original | tee "$OUT/nccl-original.json"; echo "original rc=$?"
LD_PRELOAD=/tmp/nccl-90/libnccl.so.2 python3 bench/gpu_nccl_job.py --label pruned-sm90 | tee "$OUT/nccl-pruned-90.json"; echo "pruned sm90 rc=$?"
LD_PRELOAD=/tmp/nccl-80/libnccl.so.2 timeout 300 python3 bench/gpu_nccl_job.py --label pruned-sm80-on-sm90 | tee "$OUT/nccl-pruned-80.json"; echo "pruned sm80 rc=$?"
# the doctor on each pruned record: sm_90 kept passes, sm_80 only is refused before anything runs
mkdir -p /tmp/rt && cp -r src/rapidship/runtime /tmp/rt/rapids_runtime
for keep in 90 80; do
  mkdir -p /var/tmp/spill && chmod 700 /var/tmp/spill
  PYTHONPATH=/tmp/rt RAPIDS_SPILL_DIR=/var/tmp/spill RAPIDSHIP_PRUNE_RECORD=$OUT/prune-nccl-$keep.json python3 -m rapids_runtime.doctor --preflight
  echo "doctor --preflight, libnccl pruned to sm_$keep: rc=$? (3 = refused)"
done
# which device code NCCL's one-process collectives load (its kernels are in __nv_relfatbin too)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT python3 bench/gpu_nccl_job.py --label original-debug 2>&1 | grep -iE "kernel|cubin|fatbin|version|jit|link" | head -20
