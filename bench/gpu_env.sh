# Sourced by the GPU run scripts (bash, from the repository root): the carried wheels (.whl/w) into
# /tmp/site, the runtime package as rapids_runtime, the machine's CuPy and CUDA 13 libraries, a 0700
# spill dir. Exits 8 when the wheels do not install.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/w/*.whl || exit 8
rm -rf /tmp/rt && mkdir -p /tmp/rt && cp -r src/rapidship/runtime /tmp/rt/rapids_runtime
SITE=$(python3 -c "import cupy, os; print(os.path.dirname(os.path.dirname(cupy.__file__)))")
export PYTHONPATH=/tmp/site:/tmp/rt PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$SITE/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export PATH=/tmp/site/bin:$PATH SITE
mkdir -p /var/tmp/spill && chmod 700 /var/tmp/spill
export RAPIDS_SPILL_DIR=/var/tmp/spill DASK_TEMPORARY_DIRECTORY=/var/tmp/spill
python3 -c "import cupy, pynvml, dask_cuda; print('cupy', cupy.__version__, 'dask_cuda', dask_cuda.__version__)"
nvidia-smi --query-gpu=name,memory.total,compute_cap,uuid --format=csv,noheader
