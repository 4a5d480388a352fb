# The metrics on a real GPU worker (H200; no Docker there: a child cgroup v2 with memory.max stands
# in for `docker run --memory`): metrics_cluster.py under a 12 GiB cap, with Debian's Prometheus
# carried as .whl/prometheus.gz (+ .whl/prometheus.sha256) beside the wheels of .whl/w.
# Report: $OUT/gpu-metrics.json.
versions
gunzip -c .whl/prometheus.gz > /tmp/prometheus && chmod 755 /tmp/prometheus
[ "$(sha256sum /tmp/prometheus | cut -c1-64)" = "$(cat .whl/prometheus.sha256)" ] || { echo "PROMETHEUS SHA256 MISMATCH"; exit 9; }
/tmp/prometheus --version 2>&1 | head -1
rm -rf /var/tmp/spill/* /tmp/gpu-metrics
step "the GPU worker's /metrics, scraped by Prometheus"
cap 12G timeout 400 python3 "$HERE/jobs/metrics_cluster.py" "$OUT/gpu-metrics.json"
echo "job rc=$?"
tail -5 /tmp/gpu-metrics/worker.log; grep -i "error\|warn" /tmp/gpu-metrics/prometheus.log | tail -3
