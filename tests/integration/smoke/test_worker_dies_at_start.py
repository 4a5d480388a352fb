"""A worker that dies as it starts, in the real cpu-debian12 image with a real distributed
LocalCluster (what the cpu smoke starts): its nanny's worker process exits at once (a preload that
exits, a SIGKILL as the OOM killer sends). The stage says the worker died, at once, with its exit
code or signal: not "still starting its worker" after --worker-timeout, nor distributed's bare
"Nanny failed to start.". The runtime under test is this checkout's, mounted over the image's."""

from __future__ import annotations

import subprocess

import pytest

from support.commands import ROOT

pytestmark = pytest.mark.docker

PRELOADS = {"exits": "import os\nos._exit(3)\n",
            "killed": "import os, signal\ndef dask_setup(worker):\n    os.kill(os.getpid(), signal.SIGKILL)\n"}
SCRIPT = """
import sys, time
from rapids_runtime import session
from distributed import LocalCluster

if __name__ == "__main__":
    t0 = time.monotonic()
    try:
        with session.cluster_session(lambda: LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                                          preload=["dies"], dashboard_address=None), 1, 60, 5, []):
            print("VERDICT the cluster started")
    except Exception as err:
        print(f"VERDICT {time.monotonic() - t0:.1f} {session.describe(err, 60)}")
"""


@pytest.mark.parametrize("how, said", [("exits", "exited with code 3"), ("killed", "exited with signal 9")])
def test_a_worker_that_dies_as_it_starts_is_said_at_once(cpu_image, tmp_path, how, said):
    (tmp_path / "dies.py").write_text(PRELOADS[how])
    (tmp_path / "run.py").write_text(SCRIPT)
    for path in (tmp_path, *tmp_path.iterdir()):   # the image's own uid reads them
        path.chmod(0o755 if path.is_dir() else 0o644)
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "-e", "RAPIDS_DOCTOR=off",
                           "-e", "PYTHONPATH=/checkout:/case", "-v", f"{tmp_path}:/case:ro",
                           "-v", f"{ROOT / 'src' / 'rapidship' / 'runtime'}:/checkout/rapids_runtime:ro",
                           "-w", "/tmp", "--entrypoint", "python", cpu_image.ref, "/case/run.py"],
                          capture_output=True, text=True, timeout=180)
    verdict = next((line for line in proc.stdout.splitlines() if line.startswith("VERDICT ")), None)
    assert verdict is not None, proc.stdout[-2000:] + proc.stderr[-3000:]
    seconds, text = float(verdict.split()[1]), verdict.split(" ", 2)[2]
    assert text.startswith("WorkerDied: a worker process ") and said in text and "died at once" in text, verdict
    assert "still starting" not in text and seconds < 30, verdict
