#!/bin/bash
# Pruned device code on a real GPU (an sm_90 H200 without network), in one run from the repo root:
#  1. RAPIDS cu13 wheels pruned to sm_90 beforehand (`invoke prune --keep 90 ...`), carried as
#     .whl/p* parts of one tar (.whl/SUM its sha256), installed with --no-deps into /tmp/site;
#     the machine's own CUDA 13 libraries untouched: bench/gpu_prune_proof.py (cuDF vs pandas,
#     cuML vs scikit-learn, cuRAND/cuBLAS hashes).
#  2. The machine's CUDA 13 libraries and CuPy pruned in place to sm_90 by the same stage
#     (python -m rapidship.builder.prune, cuobjdump-checked): the proof again, and the cuDF spill smoke.
#  3. Negative: the originals pruned to sm_80 only: the doctor must refuse with its FATAL line,
#     and with the doctor off the first cuRAND/cuBLAS kernel must fail.
# Reports land in $OUT (proof-*.json, prune-*.json, smoke-cudf.json, logs.txt).
R=$(pwd)
OUT=${OUT:-$R/gpu-prune-out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/logs.txt") 2>&1
set -u
step() { echo; echo "=== $* ($(date +%T))"; }

step assemble
mkdir -p /tmp/parts && cp .whl/p* /tmp/parts/ 2>/dev/null; ls -la /tmp/parts   # earlier calls left their parts there
cat /tmp/parts/p* > /tmp/wheels.tar && (cd /tmp && sha256sum -c "$R/.whl/SUM") || { echo "SHA256 MISMATCH"; exit 9; }
(cd /tmp && tar xf wheels.tar)
t0=$(date +%s)
# cuVS 26.10 needs nvJitLink 13.3 (__nvJitLinkCreate_13_3); the machine has 13.0: upgrade it where it is
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade /tmp/w/nvidia_nvjitlink-*.whl || exit 8
rm /tmp/w/nvidia_nvjitlink-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/w/*.whl || exit 8
echo "pip install: $(( $(date +%s) - t0 )) s"
mkdir -p /tmp/rt && cp -r src/rapidship/runtime /tmp/rt/rapids_runtime
export PYTHONPATH=/tmp/site:/tmp/rt PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
SITE=$(python3 -c "import cupy, os; print(os.path.dirname(os.path.dirname(cupy.__file__)))")
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
echo "system site-packages: $SITE; cuobjdump: $CUOBJDUMP"
du -sh "$SITE/nvidia" "$SITE/cupy"
# --target installs have no nvidia/ beside them: the wheels' RPATH ($ORIGIN/../../nvidia/cu13/lib)
# cannot find the machine's CUDA 13 libraries, so name their folder.
export LD_LIBRARY_PATH=$SITE/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 -c "import libcuml; print('libcuml loads:', libcuml.load_library())" 2>&1 | tail -1
mkdir -p /var/tmp/spill && chmod 700 /var/tmp/spill
export RAPIDS_SPILL_DIR=/var/tmp/spill DASK_TEMPORARY_DIRECTORY=/var/tmp/spill
prune() { PYTHONPATH=$R/src python3 -m rapidship.builder.prune --cuobjdump "$CUOBJDUMP" --jobs 8 "$@"; }

step "1: RAPIDS pruned to sm_90, CUDA libraries original"
cp /tmp/w/wheels-prune.json "$OUT/prune-wheels-90.json"
RAPIDSHIP_PRUNE_RECORD=$OUT/prune-wheels-90.json python3 -m rapids_runtime.doctor --json > /tmp/doctor-90.json
echo "doctor rc=$?"; python3 -c "import json; d=json.load(open('/tmp/doctor-90.json')); print(json.dumps({k: d[k] for k in d if k in ('fatal','ok')}))"
python3 bench/gpu_prune_proof.py --label "rapids-sm90 cuda-original" --out "$OUT/proof-rapids90.json" > /dev/null
echo "proof rc=$?"

step "2: the machine's CUDA 13 libraries and CuPy pruned in place to sm_90"
cp -a "$SITE/nvidia" /tmp/nvidia-orig && cp -a "$SITE/cupy" /tmp/cupy-orig
prune --keep 90 --record "$OUT/prune-cuda13-90.json" "$SITE/nvidia" "$SITE/cupy"
du -sh "$SITE/nvidia" "$SITE/cupy"
python3 bench/gpu_prune_proof.py --label "rapids-sm90 cuda-sm90" --out "$OUT/proof-all90.json" > /dev/null
echo "proof rc=$?"
RAPIDSHIP_PRUNE_RECORD=$OUT/prune-cuda13-90.json RAPIDS_PRE_IMPORT=dask_cudf timeout 300 \
  python3 -m rapids_runtime.smoke spill --mode cudf --device-memory-limit 1GB --memory-limit 1GB \
  --out "$OUT/smoke-cudf.json" > /dev/null
echo "smoke cudf rc=$?"

step "3: negative: the original CUDA libraries pruned to sm_80 only"
rm -rf "$SITE/nvidia" "$SITE/cupy" && cp -a /tmp/nvidia-orig "$SITE/nvidia" && cp -a /tmp/cupy-orig "$SITE/cupy"
prune --keep 80 --record /tmp/prune-cuda13-80.json "$SITE/nvidia" "$SITE/cupy" | tail -1
RAPIDSHIP_PRUNE_RECORD=/tmp/prune-cuda13-80.json python3 -m rapids_runtime.doctor --preflight
echo "doctor --preflight rc=$? (3 = refused)"
timeout 300 python3 bench/gpu_prune_proof.py --only cupy --label "cuda-sm80 on sm90" --out /tmp/proof-80.json > /dev/null
echo "proof (cupy, sm_80 libraries) rc=$?"
python3 -c "import json; d=json.load(open('/tmp/proof-80.json')); print(json.dumps(d, indent=1)[:3000])"
ls -la "$OUT"
