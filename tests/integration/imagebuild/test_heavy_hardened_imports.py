"""The full RAPIDS image imports its libraries under its own hardened run profile, on both arches.

As the image's uid 1001 and as an arbitrary uid in group 0, with a read-only root and a tmpfs /tmp,
no capabilities, no new privileges and no network (docs/deploy.md, the run profile): `import cudf,
cuml, dask_cuda, ucxx, cupy, rmm` printed a raw OSError before this round (CuPy creates its kernel
cache under the home at import). The image keeps every run-time cache under /tmp now. No GPU here:
the imports load the libraries, no kernel runs; arm64 runs under qemu.

Heavy: needs both cuda12-debian12 images built (tests/integration/imagebuild/test_heavy_rapids_pip.py);
run by hand: `python3 -m pytest -m heavy -s tests/integration/imagebuild/test_heavy_hardened_imports.py`.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from rapidship.imagebuild.buildkit import read_record
from rapidship.records import Workspace
from support.commands import ROOT

pytestmark = [pytest.mark.heavy, pytest.mark.docker]
VARIANT = "cuda12-debian12"
IMPORTS = "import cudf, cuml, dask_cuda, ucxx, cupy, rmm; print('imported')"
HARDENED = ["--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,size=256m,mode=1777", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges:true", "--network", "none", "--memory", "4g", "--memory-swap", "4g"]


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
@pytest.mark.parametrize("user", ["1001:0", "123456:0"])
def test_the_rapids_image_imports_under_its_hardened_profile(engine, arch, user):
    image = read_record(Workspace(ROOT / "build"), VARIANT, arch).ref
    start = time.monotonic()
    proc = subprocess.run(["docker", "run", "--rm", "--platform", f"linux/{arch}", "--user", user, *HARDENED, image,
                           "python", "-c", IMPORTS], capture_output=True, text=True, timeout=1800)
    took = round(time.monotonic() - start, 1)
    print(f"\n{arch} as {user}: exit {proc.returncode} in {took} s")
    assert proc.returncode == 0 and "imported" in proc.stdout, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    doctor = subprocess.run(["docker", "run", "--rm", "--platform", f"linux/{arch}", "--user", user, *HARDENED,
                             "--entrypoint", "rapids-doctor", image, "--json"], capture_output=True, text=True,
                            timeout=900)
    caches = [f for f in json.loads(doctor.stdout)["findings"] if f["topic"] == "cache"]
    assert caches == []  # every cache has its writable place under the profile's /tmp


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_the_guard_s_names_are_derived_from_the_env_s_device_code(engine, arch):
    """Every distribution with a pruned file names its top-level packages in guarded.txt: CuPy's
    three, the lib* wheels that hold cuDF's and cuML's device code; nothing without device code."""
    image = read_record(Workspace(ROOT / "build"), VARIANT, arch).ref
    names = subprocess.run(["docker", "run", "--rm", "--platform", f"linux/{arch}", "--entrypoint", "cat", image,
                            "/opt/rapidship/guarded.txt"], capture_output=True, text=True, check=True).stdout.split()
    print(f"\n{arch}: guarded.txt {' '.join(names)}")
    assert {"cupy", "cupy_backends", "cupyx", "cudf", "libcudf", "libcuml"} <= set(names)
    assert not {"dask", "distributed", "numpy", "pandas", "rapids_runtime"} & set(names)
