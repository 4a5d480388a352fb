#!/bin/bash
# The metrics on a real GPU worker (H200; no Docker there: a child cgroup v2 with memory.max stands
# in for `docker run --memory`): bench/gpu_metrics_job.py under a 12 GiB cap, with Debian's
# Prometheus carried as .whl/prometheus.gz (+ .whl/prometheus.sha256). Report: $OUT/gpu-metrics.json.
R=$(pwd)
OUT=${OUT:-$R/gpu-metrics-out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/metrics-logs.txt") 2>&1
set -u
echo "=== assemble ($(date +%T))"
. "$R/bench/gpu_env.sh"
gunzip -c .whl/prometheus.gz > /tmp/prometheus && chmod 755 /tmp/prometheus
[ "$(sha256sum /tmp/prometheus | cut -c1-64)" = "$(cat .whl/prometheus.sha256)" ] || { echo "PROMETHEUS SHA256 MISMATCH"; exit 9; }
/tmp/prometheus --version 2>&1 | head -1
rm -rf /var/tmp/spill/* /tmp/gpu-metrics
. "$R/bench/gpu_cap.sh"
echo "=== the GPU worker's /metrics, scraped by Prometheus ($(date +%T))"
cap 12G timeout 400 python3 bench/gpu_metrics_job.py "$OUT/gpu-metrics.json"
echo "job rc=$?"
tail -5 /tmp/gpu-metrics/worker.log; grep -i "error\|warn" /tmp/gpu-metrics/prometheus.log | tail -3
