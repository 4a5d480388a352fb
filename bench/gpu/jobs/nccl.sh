# NCCL pruned on a real GPU (an sm_90 H200, no network): the machine's own libnccl (its CUDA 13
# wheel) copied and pruned by the builder's stage (python -m rapidship.builder.prune,
# cuobjdump-checked) to sm_90, and to sm_80 only for the negative case; nccl_collectives.py runs
# NCCL's collectives with each (LD_PRELOAD) and checks them exactly.
# Reports in $OUT: nccl-*.json, prune-nccl-*.json, logs.txt.
COLLECTIVES=$HERE/jobs/nccl_collectives.py
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv
SITE=$(site_packages)
NCCL=$(find "$SITE/nvidia" -name 'libnccl.so.2' | head -1)
CUOBJDUMP=$(cuobjdump_path)
echo "libnccl: $NCCL ($(stat -c %s "$NCCL") bytes); cuobjdump: $CUOBJDUMP"
for keep in 90 80; do
  prune_copy nccl-$keep $keep "$NCCL"
  python3 -c "import json; f=json.load(open('$OUT/prune-nccl-$keep.json'))['files'][0]; print('keep $keep:', f['status'], f['bytes_before'], '->', f['bytes_after'], f.get('reason',''))"
done
python3 "$COLLECTIVES" --label original | tee "$OUT/nccl-original.json"; echo "original rc=$?"
LD_PRELOAD=/tmp/p/nccl-90/libnccl.so.2 python3 "$COLLECTIVES" --label pruned-sm90 | tee "$OUT/nccl-pruned-90.json"; echo "pruned sm90 rc=$?"
LD_PRELOAD=/tmp/p/nccl-80/libnccl.so.2 timeout 300 python3 "$COLLECTIVES" --label pruned-sm80-on-sm90 | tee "$OUT/nccl-pruned-80.json"; echo "pruned sm80 rc=$?"
# the doctor on each pruned record: sm_90 kept passes, sm_80 only is refused before anything runs
mkdir -p /var/tmp/spill && chmod 700 /var/tmp/spill
for keep in 90 80; do
  PYTHONPATH=/tmp/rt RAPIDS_SPILL_DIR=/var/tmp/spill RAPIDSHIP_PRUNE_RECORD=$OUT/prune-nccl-$keep.json python3 -m rapids_runtime.doctor --preflight
  echo "doctor --preflight, libnccl pruned to sm_$keep: rc=$? (3 = refused)"
done
# which device code NCCL's one-process collectives load (its kernels are in __nv_relfatbin too)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT python3 "$COLLECTIVES" --label original-debug 2>&1 | grep -iE "kernel|cubin|fatbin|version|jit|link" | head -20
