# Pruned device code on a real GPU (an sm_90 H200 without network), in one run:
#  1. RAPIDS cu13 wheels pruned to sm_90 beforehand (`invoke prune --keep 90 ...`), carried as
#     .whl/p* parts of one tar (.whl/SUM its sha256, wheels-prune.json the prune record inside),
#     installed with --no-deps into /tmp/site; the machine's own CUDA 13 libraries untouched:
#     prune_proof.py (cuDF vs pandas, cuML vs scikit-learn, cuRAND/cuBLAS hashes).
#  2. The machine's CUDA 13 libraries and CuPy pruned in place to sm_90 by the same stage
#     (python -m rapidship.builder.prune, cuobjdump-checked): the proof again, and the cuDF spill smoke.
#  3. Negative: the originals pruned to sm_80 only: the doctor must refuse with its FATAL line,
#     and with the doctor off the first cuRAND/cuBLAS kernel must fail.
# Reports in $OUT: proof-*.json, prune-*.json, smoke-cudf.json, logs.txt.
PROOF=$HERE/jobs/prune_proof.py
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
CUOBJDUMP=$(cuobjdump_path)
echo "system site-packages: $SITE; cuobjdump: $CUOBJDUMP"
du -sh "$SITE/nvidia" "$SITE/cupy"
python3 -c "import libcuml; print('libcuml loads:', libcuml.load_library())" 2>&1 | tail -1

step "1: RAPIDS pruned to sm_90, CUDA libraries original"
cp /tmp/w/wheels-prune.json "$OUT/prune-wheels-90.json"
RAPIDSHIP_PRUNE_RECORD=$OUT/prune-wheels-90.json python3 -m rapids_runtime.doctor --json > /tmp/doctor-90.json
echo "doctor rc=$?"; python3 -c "import json; d=json.load(open('/tmp/doctor-90.json')); print(json.dumps({k: d[k] for k in d if k in ('fatal','ok')}))"
python3 "$PROOF" --label "rapids-sm90 cuda-original" --out "$OUT/proof-rapids90.json" > /dev/null
echo "proof rc=$?"

step "2: the machine's CUDA 13 libraries and CuPy pruned in place to sm_90"
cp -a "$SITE/nvidia" /tmp/nvidia-orig && cp -a "$SITE/cupy" /tmp/cupy-orig
prune_in_place --keep 90 --record "$OUT/prune-cuda13-90.json" "$SITE/nvidia" "$SITE/cupy"
du -sh "$SITE/nvidia" "$SITE/cupy"
python3 "$PROOF" --label "rapids-sm90 cuda-sm90" --out "$OUT/proof-all90.json" > /dev/null
echo "proof rc=$?"
RAPIDSHIP_PRUNE_RECORD=$OUT/prune-cuda13-90.json RAPIDS_PRE_IMPORT=dask_cudf timeout 300 \
  python3 -m rapids_runtime.smoke spill --mode cudf --device-memory-limit 1GB --memory-limit 1GB \
  --out "$OUT/smoke-cudf.json" > /dev/null
echo "smoke cudf rc=$?"

step "3: negative: the original CUDA libraries pruned to sm_80 only"
rm -rf "$SITE/nvidia" "$SITE/cupy" && cp -a /tmp/nvidia-orig "$SITE/nvidia" && cp -a /tmp/cupy-orig "$SITE/cupy"
prune_in_place --keep 80 --record /tmp/prune-cuda13-80.json "$SITE/nvidia" "$SITE/cupy" | tail -1
RAPIDSHIP_PRUNE_RECORD=/tmp/prune-cuda13-80.json python3 -m rapids_runtime.doctor --preflight
echo "doctor --preflight rc=$? (3 = refused)"
timeout 300 python3 "$PROOF" --only cupy --label "cuda-sm80 on sm90" --out /tmp/proof-80.json > /dev/null
echo "proof (cupy, sm_80 libraries) rc=$?"
python3 -c "import json; d=json.load(open('/tmp/proof-80.json')); print(json.dumps(d, indent=1)[:3000])"
ls -la "$OUT"
