"""The real RAPIDS image (cuDF, dask-cudf, dask-cuda from PyPI wheels) against the 4.7 GB budget.

Heavy: several GB of downloads and a ~5 minute build. Never in CI; run by hand with
`python -m pytest -m heavy tests/test_heavy_rapids_pip.py` and copy the numbers into docs/sizes.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import invoke

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

pytestmark = [pytest.mark.heavy, pytest.mark.docker]
VARIANT = "cuda12-debian12"


def test_rapids_pip_image_builds_and_fits_the_budget(engine):
    from rapidship.build import read_record
    from rapidship.matrix import load_matrix

    invoke("lock", "--check", "--env", "rapids-pip")
    invoke("base", "--os", "debian12")
    invoke("build", "--variant", VARIANT, "--arch", "amd64")
    built = read_record(ROOT / "build" / VARIANT, "amd64")
    budget = load_matrix(ROOT / "variants.yaml").get(VARIANT).budget_bytes
    assert budget == 4_700_000_000
    assert built.size_bytes <= budget, f"{built.size_bytes:,} bytes is {built.size_bytes - budget:,} over the budget"

    rep = json.loads(invoke("size-report", "--variant", VARIANT, "--arch", "amd64", "--json").stdout)
    assert rep["within_budget"] and rep["image_bytes"] == built.size_bytes
    assert rep["trims"]["trimmed_bytes"] > 0  # the venv trims removed something real
    print(f"\n{VARIANT}: {built.size_bytes:,} bytes uncompressed, zstd {built.zstd_bytes:,}, "
          f"headroom {rep['headroom_bytes']:,}, built in {built.seconds}s")

    # The RAPIDS stack imports (no GPU needed to import), through the real entrypoint and preflight.
    code = "import cudf, dask_cudf, dask_cuda, rmm; print(cudf.__version__, dask_cuda.__version__)"
    run = subprocess.run(["docker", "run", "--rm", "--user", "4242:0", built.ref, "python", "-c", code],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("26.10")
    # What the env spec omits is really absent (and what cuDF needs is there).
    listing = subprocess.run(["docker", "run", "--rm", "-e", "RAPIDS_DOCTOR=off", built.ref, "python", "-m", "pip",
                              "--version"], capture_output=True, text=True, check=False)
    assert listing.returncode != 0  # no pip in the runtime env
    libs = subprocess.run(["docker", "run", "--rm", "-e", "RAPIDS_DOCTOR=off", built.ref, "ls",
                           "/opt/rapids/lib/python3.11/site-packages/nvidia"], capture_output=True, text=True, check=True)
    assert "cusolver" not in libs.stdout.split() and "cufft" not in libs.stdout.split()
    assert {"cublas", "curand", "cuda_nvrtc", "libnvcomp"} <= set(libs.stdout.split())
