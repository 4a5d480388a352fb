# Sourced by bench/gpu/run.sh (bash, from the repository root): the steps every GPU job shares.
# The GPU machine has no network and no Docker: wheels come carried under .whl/, a child cgroup v2
# with memory.max stands in for `docker run --memory`.

step() { echo; echo "=== $* ($(date +%T))"; }

# The machine's own site-packages (its CuPy and the CUDA 13 wheels beside it).
site_packages() { python3 -c "import cupy, os; print(os.path.dirname(os.path.dirname(cupy.__file__)))"; }

cuobjdump_path() { command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1; }

# Parts of one wheel tar (.whl/p*, .whl/SUM its sha256) gather in /tmp/parts across calls, one
# carry each; the tar is unpacked to /tmp/w once all are there. Exit 9 while it does not match.
gather_parts() {
  mkdir -p /tmp/parts && cp .whl/p* .whl/SUM /tmp/parts/ 2>/dev/null
  echo "parts here: $(cd /tmp/parts && ls p* 2>/dev/null | tr '\n' ' ')"
}

unpack_parts() {
  cat /tmp/parts/p* > /tmp/wheels.tar && (cd /tmp && sha256sum -c /tmp/parts/SUM | sed 's/^.*wheels/wheels/') \
    || { echo "SHA256 MISMATCH"; exit 9; }
  rm -rf /tmp/w && (cd /tmp && tar xf wheels.tar)
}

# Wheels into /tmp/site with --target (no deps, no network), once per set: /tmp/site/.wheel-set
# names the set it holds, so a second call of a job starts at once. Exit 8 when they do not install.
installed() { [ -n "$1" ] && [ "$(cat /tmp/site/.wheel-set 2>/dev/null)" = "$1" ]; }

install_site() {  # WHEEL_DIR SET_ID
  installed "$2" && { echo "wheels: installed before"; return; }
  local t0; t0=$(date +%s)
  # cuVS 26.10 needs nvJitLink 13.3 (__nvJitLinkCreate_13_3); the machine has 13.0: upgrade it where it is
  if ls "$1"/nvidia_nvjitlink-*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "$1"/nvidia_nvjitlink-*.whl || exit 8
  fi
  rm -rf /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    $(ls "$1"/*.whl | grep -v '/nvidia_nvjitlink-') || exit 8
  echo "$2" > /tmp/site/.wheel-set
  echo "pip install: $(( $(date +%s) - t0 )) s"
}

versions() {  # what the job runs with
  python3 -c "import cupy, pynvml, dask_cuda; print('cupy', cupy.__version__, 'dask_cuda', dask_cuda.__version__)"
  nvidia-smi --query-gpu=name,memory.total,compute_cap,uuid --format=csv,noheader
}

# The runtime package as the images carry it (rapids_runtime), fresh from this work tree.
runtime_package() { rm -rf /tmp/rt && mkdir -p /tmp/rt && cp -r src/rapidship/runtime /tmp/rt/rapids_runtime; }

# The env of a job: the carried wheels and the runtime first, the machine's CUDA 13 libraries named
# (--target installs have no nvidia/ beside them, so the wheels' RPATH cannot find them).
use_site() {
  SITE=$(site_packages)
  export SITE PYTHONPATH=/tmp/site:/tmp/rt PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
  export LD_LIBRARY_PATH=$SITE/nvidia/cu13/lib:/tmp/site/libucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

spill_dir() {  # a 0700 spill dir, where the images have theirs configured
  mkdir -p /var/tmp/spill && chmod 700 /var/tmp/spill
  export RAPIDS_SPILL_DIR=/var/tmp/spill DASK_TEMPORARY_DIRECTORY=/var/tmp/spill
}

cap() {  # run "$@" in a fresh child cgroup v2 with memory.max = $1 (no swap); print peak and OOM kills
  local name=rapidship-$RANDOM limit=$1; shift
  mkdir /sys/fs/cgroup/$name && echo "$limit" > /sys/fs/cgroup/$name/memory.max && echo 0 > /sys/fs/cgroup/$name/memory.swap.max
  ( echo $BASHPID > /sys/fs/cgroup/$name/cgroup.procs; "$@" )
  local rc=$?
  echo "cgroup $name: memory.max $limit, peak $(cat /sys/fs/cgroup/$name/memory.peak), $(grep oom_kill /sys/fs/cgroup/$name/memory.events | tr '\n' ' ')"
  rmdir /sys/fs/cgroup/$name 2>/dev/null
  return $rc
}

smoke() {  # NAME ARGS...: one rapids-smoke spill run, its report in $OUT/NAME.json; SMOKE_TIMEOUT bounds it
  local name=$1; shift; local t; t=$(date +%s); rm -rf /var/tmp/spill/*
  timeout "${SMOKE_TIMEOUT:-540}" python3 -m rapids_runtime.smoke spill --out "$OUT/$name.json" "$@" > /dev/null
  echo "== $name rc=$? wall=$(( $(date +%s) - t )) s"
}

prune_copy() {  # NAME KEEP LIB [ENV=VALUE...]: LIB copied to /tmp/p/NAME and pruned there by the builder's stage
  local name=$1 keep=$2 lib=$3; shift 3
  mkdir -p /tmp/p/$name && cp "$lib" /tmp/p/$name/
  env "$@" PYTHONPATH=$R/src python3 -m rapidship.builder.prune --keep $keep --cuobjdump "$CUOBJDUMP" \
    --record "$OUT/prune-$name.json" /tmp/p/$name/$(basename "$lib") | tail -1
}

prune_in_place() {  # ARGS...: the builder's stage over whole trees, 8 jobs
  PYTHONPATH=$R/src python3 -m rapidship.builder.prune --cuobjdump "$CUOBJDUMP" --jobs 8 "$@"
}

job() {  # LABEL WHAT [ENV=VALUE...]: forms_kernels.py WHAT in a process of its own, its JSON to $OUT/run-LABEL.json
  local label=$1 what=$2; shift 2
  env "$@" timeout 300 python3 "$HERE/jobs/forms_kernels.py" $what --label $label | grep '^{' > "$OUT/run-$label.json"
  echo "$label rc=${PIPESTATUS[0]} $(head -c 300 "$OUT/run-$label.json")"
}
