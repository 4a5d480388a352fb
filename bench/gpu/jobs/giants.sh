# Which of the env's large optional files a RAPIDS workload loads (issue: the last bytes, item 3), on
# an H200: imports of cupy, numba.cuda, dask_cuda, cudf, dask_cudf, then a numba CUDA kernel and cuDF's
# string, row, rolling and groupby-JIT UDFs actually run, each in its own process; then every
# candidate nothing loaded is hidden and the same scenarios must give the same answers.
# The machine's wheels are CUDA 13 (cudf-cu13, numba-cuda-mlir, its own nvidia/cu13 tree); the image's
# are cu12 of the same RAPIDS, numba-cuda and numba-cuda-mlir versions: which Python package imports
# what, and which program a UDF starts, does not depend on the CUDA major.
# Wheels as for the smoke_big job (.whl/p* + .whl/SUM: docs/measurements/gpu-smoke.md). Reports land in $OUT.
versions
step "trace, then hide what nothing loaded and run again"
python3 "$HERE/jobs/giants_trace.py" --out "$OUT/giants.json" --hide
echo "giants_trace rc=$?"
