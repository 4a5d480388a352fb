# GPU cluster smoke on a machine without Docker: one scheduler and N `dask cuda worker` processes,
# each worker in its own cgroup v2 child with memory.max (standing in for `docker run --memory`),
# spread over the machine's GPUs (all on one with one GPU), talking UCX over TCP (UCX_TLS=tcp,cuda_copy;
# NVLINK=1 adds NVLink through cuda_ipc). Clients: the image's job (rapids_runtime.cluster --xp cupy)
# and cluster_client.py (JOBS="runtime bench").
# Wheels: .whl/p* + .whl/SUM (one tar of the wheels docs/measurements/gpu-smoke.md lists), installed with --target.
# Also: the doctor's view of the field worker command, with and without ucxx importable.
N=${N:-2}; GB=${GB:-12}; DEV=${DEV:-1GB}; HOST=${HOST:-2GB}; CAP=${CAP:-5G}
PIDS=""; CGS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null; done; sleep 2; for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
            for c in $CGS; do echo "cgroup $c: peak $(cat /sys/fs/cgroup/$c/memory.peak 2>/dev/null), \
$(grep oom_kill /sys/fs/cgroup/$c/memory.events 2>/dev/null | tr '\n' ' ')"; rmdir /sys/fs/cgroup/$c 2>/dev/null; done; }
trap cleanup EXIT

GPUS=$(nvidia-smi -L | wc -l)  # worker i on GPU (i-1) mod GPUS; NVLINK=1 adds --enable-nvlink and cuda_ipc
export UCX_TLS=tcp,cuda_copy,self${NVLINK:+,cuda_ipc} UCX_TCP_CM_REUSEADDR=y NCCL_NVLS_ENABLE=0
for ns in DASK_DISTRIBUTED__COMM__UCX DASK_DISTRIBUTED_UCXX; do
  export ${ns}__TCP=True ${ns}__CUDA_COPY=True ${ns}__NVLINK=False ${ns}__INFINIBAND=False ${ns}__RDMACM=False
done
export DASK_DISTRIBUTED__COMM__COMPRESSION=False
for k in TARGET SPILL PAUSE TERMINATE; do export DASK_DISTRIBUTED__WORKER__MEMORY__$k=False; done
SPILL=/var/tmp/cluster-spill; rm -rf $SPILL; mkdir -p $SPILL && chmod 700 $SPILL
python3 -c "import ucxx, distributed_ucxx, dask_cuda; print('ucxx', ucxx.__version__, 'dask_cuda', dask_cuda.__version__)"
ls /tmp/site/bin | grep -E 'dask' | tr '\n' ' '; echo
dask cuda worker --help > /dev/null 2>&1 && echo "dask cuda worker: present"
dask-cuda-worker --help > /dev/null 2>&1 && echo "dask-cuda-worker: present (deprecated spelling)"

step "doctor: the field worker command"
FIELD="dask cuda worker --rmm-async --rmm-pool-size 2GB --local-directory $SPILL --enable-tcp-over-ucx --enable-nvlink --scheduler tcp://127.0.0.1:8786"
RAPIDS_SPILL_DIR=$SPILL DASK_TEMPORARY_DIRECTORY=$SPILL RAPIDSHIP_PRUNE_RECORD=/nonexistent \
  python3 -m rapids_runtime.doctor --preflight --json -- $FIELD > "$OUT/doctor-field.json"; echo "doctor rc=$?"
mkdir -p /tmp/noucx && printf 'import sys\nsys.modules["ucxx"]=None\n' > /tmp/noucx/sitecustomize.py
PYTHONPATH=/tmp/noucx:$PYTHONPATH RAPIDS_SPILL_DIR=$SPILL DASK_TEMPORARY_DIRECTORY=$SPILL RAPIDSHIP_PRUNE_RECORD=/nonexistent \
  python3 -m rapids_runtime.doctor --preflight -- $FIELD; echo "doctor without ucxx rc=$? (3 = refused)"
df -h /dev/shm | tail -1

step "scheduler (UCX over TCP)"
dask scheduler --protocol ucx --host 127.0.0.1 --port 8786 --no-dashboard > "$OUT/scheduler.log" 2>&1 &
PIDS="$PIDS $!"; sleep 8
step "$N workers: device $DEV, host $HOST each, each in a cgroup with memory.max $CAP"
for i in $(seq 1 "$N"); do
  c=rapidship-w$i-$RANDOM; mkdir /sys/fs/cgroup/$c; echo "$CAP" > /sys/fs/cgroup/$c/memory.max; echo 0 > /sys/fs/cgroup/$c/memory.swap.max
  CGS="$CGS $c"; mkdir -p $SPILL/w$i && chmod 700 $SPILL/w$i
  ( echo $BASHPID > /sys/fs/cgroup/$c/cgroup.procs
    exec env CUDA_VISIBLE_DEVICES=$(( (i - 1) % GPUS )) dask cuda worker ucx://127.0.0.1:8786 --name w$i --nthreads 1 \
      --device-memory-limit "$DEV" --memory-limit "$HOST" --local-directory $SPILL/w$i \
      --rmm-async --rmm-pool-size 2GB --enable-tcp-over-ucx ${NVLINK:+--enable-nvlink} --death-timeout 60 ) > "$OUT/worker$i.log" 2>&1 &
  PIDS="$PIDS $!"
done
if [[ " ${JOBS:-runtime bench} " == *" runtime "* ]]; then
step "the image's cluster job (rapids_runtime.cluster --xp cupy): $GB GB, row blocks -> column blocks"
t=$(date +%s)
timeout $(( ${RT_TIMEOUT:-240} + 60 )) python3 -m rapids_runtime.cluster --scheduler ucx://127.0.0.1:8786 --workers "$N" --xp cupy \
  --data-bytes "${GB}GB" --chunk-bytes 128MB --timeout "${RT_TIMEOUT:-240}" ${SHUFFLE:+--shuffle $SHUFFLE} --out "$OUT/cluster-runtime-gpu.json" > /dev/null
echo "runtime job rc=$? wall=$(( $(date +%s) - t )) s"; du -sh $SPILL/w* 2>/dev/null
fi
if [[ " ${JOBS:-runtime bench} " == *" bench "* ]]; then
step "job: $GB GB, persisted, then transposed and summed per column"
t=$(date +%s)
timeout 300 python3 "$HERE/jobs/cluster_client.py" --scheduler ucx://127.0.0.1:8786 --workers "$N" --gb "$GB" \
  --out "$OUT/cluster-gpu.json"; echo "job rc=$? wall=$(( $(date +%s) - t )) s"
du -sh $SPILL/w* 2>/dev/null
fi
tail -5 "$OUT/worker1.log"
