#!/bin/sh
# What a scrape of a loaded worker's /metrics costs with rapids_runtime.metrics and without it,
# side by side in one run, in the real cpu-debian12 image under a 2 GiB cap (docs/monitoring.md):
#   sh bench/metrics_scrape.sh [IMAGE]
IMAGE=${1:-rapidship/dask:26.10-cpu-debian12-py3.11-amd64}
exec docker run --rm --memory 2g --memory-swap 2g --tmpfs /spill:uid=1001,gid=0,mode=0700,size=1g \
  -e RAPIDS_DOCTOR=off --entrypoint sh "$IMAGE" -c '
dask scheduler --host 127.0.0.1 --port 8786 --dashboard-address 127.0.0.1:8787 >/tmp/s.log 2>&1 &
dask worker tcp://127.0.0.1:8786 --host 127.0.0.1 --dashboard-address 127.0.0.1:8788 --name with --nworkers 1 \
  --memory-limit 700MiB --local-directory /spill/a --preload rapids_runtime.metrics >/tmp/a.log 2>&1 &
dask worker tcp://127.0.0.1:8786 --host 127.0.0.1 --dashboard-address 127.0.0.1:8789 --name without --nworkers 1 \
  --memory-limit 700MiB --local-directory /spill/b >/tmp/b.log 2>&1 &
python - <<"PY"
import statistics, time, urllib.request
import dask.array as da
from distributed import Client
client = Client("tcp://127.0.0.1:8786", timeout=60)
client.wait_for_workers(2, timeout=60)
x = da.random.random((60_000, 2_000), chunks=(5_000, 2_000)).persist()  # 960 MB over both: both spill
client.wait_for_workers(2)
time.sleep(3)
def scrape(port):
    t = time.perf_counter()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    return time.perf_counter() - t, len(body)
for port in (8788, 8789):
    scrape(port)  # warm
runs = {8788: [], 8789: []}
for _ in range(60):
    for port in (8788, 8789):
        runs[port].append(scrape(port)[0])
a, b = statistics.median(runs[8788]), statistics.median(runs[8789])
print(f"scrape of a loaded worker (960 MB held, spilling): with rapids_runtime.metrics median {a*1e3:.2f} ms, "
      f"without {b*1e3:.2f} ms, ratio {a/b:.2f}; body {scrape(8788)[1]:,} vs {scrape(8789)[1]:,} bytes")
PY
'
