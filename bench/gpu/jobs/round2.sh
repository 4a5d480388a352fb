# Doctor and smoke round 2 on an H200 (no Docker there: a child cgroup v2 with memory.max stands in
# for `docker run --memory`):
#  1. the GPU guard at the first CUDA import (the env's .pth, read by site.addsitedir exactly as at
#     interpreter start): CuPy refused under a prune record of sm_80 only, imported under sm_90;
#     what the .pth costs an interpreter start and the first CuPy import (side by side, one run)
#  2. the doctor with the real NVML: a device limit above the GPU refused (dask cuda worker and
#     rapids-smoke), CUDA_VISIBLE_DEVICES honoured
#  3. the GPU spill smoke, twice, checking that the cluster now closes cleanly (no shutdown note)
# Wheels: .whl/w/*.whl (docs/measurements/gpu-smoke.md lists them; 12 MB). Reports land in $OUT.
ONLY=${ONLY:-123}   # which steps to run (ONLY=1 the guard alone)
versions

if [[ $ONLY == *1* ]]; then
step "1: the GPU guard"
mkdir -p /tmp/guardsite /tmp/plainsite
python3 -c "import sys; sys.path.insert(0, '/tmp/rt'); from rapids_runtime.gpu_guard import PTH_LINE, PTH_NAME; \
open('/tmp/guardsite/' + PTH_NAME, 'w').write(PTH_LINE.replace('/opt/rapidship', '/tmp/rt'))"
cat /tmp/guardsite/*.pth
for keep in "[80]" "[90]" "[80, 90]"; do
  echo "{\"keep\": $keep}" > /tmp/prune.json
  RAPIDSHIP_PRUNE_RECORD=/tmp/prune.json python3 -c "import site; site.addsitedir('/tmp/guardsite'); import cupy; \
print('keep $keep: cupy imported, sum', int(cupy.arange(1000).sum()))" 2>&1 | tail -1
  echo "keep $keep rc=${PIPESTATUS[0]}"
done
echo '{"keep": [90]}' > /tmp/prune.json
RAPIDSHIP_PRUNE_RECORD=/tmp/prune.json python3 - <<'EOF'
import statistics, subprocess, sys, time
def clock(code, n):
    out = []
    for _ in range(n):
        t = time.perf_counter(); subprocess.run([sys.executable, "-S", "-c", code], check=True); out.append(time.perf_counter() - t)
    return statistics.median(out), min(out)
import os
# -S: no site-packages but the ones named, so the guard's .pth is the only difference; cupy's own
# site dir comes first (the machine's CuPy), as in the image where the env's site-packages holds both
start = "import site; site.addsitedir('{d}')"
first = "import site; site.addsitedir('" + os.environ["SITE"] + "'); site.addsitedir('{d}'); import cupy"
for what, code, n in (("interpreter start", start, 30), ("start + first import of cupy", first, 7)):
    plain, guard = clock(code.format(d="/tmp/plainsite"), n), clock(code.format(d="/tmp/guardsite"), n)
    print(f"{what}: without the .pth median {plain[0]*1e3:.1f} ms (min {plain[1]*1e3:.1f}), with it "
          f"{guard[0]*1e3:.1f} ms (min {guard[1]*1e3:.1f}): +{(guard[0]-plain[0])*1e3:.1f} ms, ratio {guard[0]/plain[0]:.3f}")
EOF

fi
if [[ $ONLY == *2* ]]; then
step "2: the doctor with the real NVML"
RAPIDSHIP_PRUNE_RECORD=/nonexistent python3 -m rapids_runtime.doctor --preflight -- dask cuda worker tcp://127.0.0.1:1 --device-memory-limit 400GB
echo "dask cuda worker --device-memory-limit 400GB: rc=$? (3 = refused)"
RAPIDSHIP_PRUNE_RECORD=/nonexistent python3 -m rapids_runtime.smoke spill --mode gpu --device-memory-limit 400GB --memory-limit 2GB \
  --out "$OUT/refused-400gb.json" > /dev/null
echo "rapids-smoke --device-memory-limit 400GB: rc=$?"; python3 -c "import json; print(json.load(open('$OUT/refused-400gb.json'))['problems'])"
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
for v in unset "" 0 "${UUID:0:12}" 7; do
  if [ "$v" = unset ]; then unset CUDA_VISIBLE_DEVICES; else export CUDA_VISIBLE_DEVICES="$v"; fi
  RAPIDSHIP_PRUNE_RECORD=/nonexistent python3 -m rapids_runtime.doctor --json | python3 -c "import json, sys; d = json.load(sys.stdin); \
print('CUDA_VISIBLE_DEVICES=$v:', len(d['facts']['gpu']['gpus']), 'GPU(s);', d['derived']['device_memory_limit'], d['derived']['device_source'])"
done
unset CUDA_VISIBLE_DEVICES

fi
closes() {  # NAME ARGS...: a GPU smoke run (lib.sh's smoke) and what its report says of the close
  local name=$1
  RAPIDSHIP_PRUNE_RECORD=/nonexistent SMOKE_TIMEOUT=400 smoke "$@"
  python3 -c "import json; r = json.load(open('$OUT/$name.json')); s = r['stages'][0]; \
print('verdict', r['verdict'], '| notes', r['notes'], '| tiers', [(t['name'], t['bytes']) for t in s['tiers']], '| exact', s['result_ok'])"; }

if [[ $ONLY == *3* ]]; then
step "3: the GPU spill smoke closes cleanly"
cap 3G closes gpu-8g --mode gpu --data-bytes 8GB --device-memory-limit 2GB --memory-limit 1GB
cap 3G closes gpu-20g --mode gpu --data-bytes 20GB --device-memory-limit 5GB --memory-limit 1GB
fi
