# The GPU memory alerts' evidence (docs/monitoring.md): one `dask cuda worker --preload
# rapids_runtime.metrics` per RMM mode the project deploys (none, pool, async), with another process
# (CuPy) filling the card, and healthy workers holding data near their device limit; each worker's
# /metrics as it was then. Wheels: .whl/w (bench/gpu/carry.py). Report: $OUT/alerts-scrapes.json.
versions
rm -rf /var/tmp/spill/* /tmp/gpu-alerts
step "GPU memory outside dask, per RMM mode"
timeout 540 python3 "$HERE/jobs/alerts_scrapes.py" "$OUT/alerts-scrapes.json"
echo "job rc=$?"
