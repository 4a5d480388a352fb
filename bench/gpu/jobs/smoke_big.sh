# The spill smoke on an H200 beyond the documented sizes, under a cgroup v2 memory cap (the GPU
# machine has no Docker; a child cgroup with memory.max stands in for `docker run --memory`):
#  1. gpu (CuPy) mode, 64 GB of data: the sum must be exact (int64 would overflow above ~34 GB)
#  2. cudf (dask-cudf) mode, 300 partitions of 128 MiB (5e9 rows, past the same overflow)
#  3. a worker memory limit above the cap: refused before anything starts
#  4. no worker ever starts (a pre-import that hangs): fails within --worker-timeout, exits
# Wheels as for the prune job (.whl/p* + .whl/SUM). Reports land in $OUT.
want() { [[ ",${STEPS:-1,2,3,4}," == *",$1,"* ]]; }  # STEPS=1,3 runs those only (one call each stays under 10 min)

df -h /var/tmp | tail -1

if want 1; then step "1: gpu mode, 64 GB, 40 GB device + 20 GB host limits, under a 48 GiB cgroup"
cap 48G smoke gpu-64g --mode gpu --data-bytes 64GB --device-memory-limit 40GB --memory-limit 20GB; fi
if want 2; then step "2: cudf mode, 300 partitions (40 GB, 5e9 rows), under a 48 GiB cgroup"
RAPIDS_PRE_IMPORT=dask_cudf cap 48G smoke cudf-300p --mode cudf --partitions 300 --device-memory-limit 40GB --memory-limit 20GB; fi
if want 3; then step "3: worker limit 2 GB under a 1 GiB cgroup: refused before starting"
cap 1G smoke limit-over-cap --mode gpu --device-memory-limit 1GB --memory-limit 2GB
RAPIDSHIP_PRUNE_RECORD=/nonexistent cap 1G python3 -m rapids_runtime.doctor --preflight -- dask cuda worker --memory-limit 2GB tcp://127.0.0.1:8786
echo "doctor for that worker command rc=$? (3 = refused)"; fi
if want 4; then step "4: no worker ever starts (its pre-import hangs): NoWorker within --worker-timeout"
mkdir -p /tmp/hang && echo 'import time; time.sleep(10**6)' > /tmp/hang/hangmod.py
PYTHONPATH=$PYTHONPATH:/tmp/hang RAPIDS_PRE_IMPORT=hangmod smoke no-worker --mode gpu --data-bytes 2GB \
  --device-memory-limit 1GB --memory-limit 1GB --worker-timeout 30; fi
ls -la "$OUT"
