"""cpu-debian12 for arm64, cross-installed: the builder runs natively on this amd64 machine and
installs the aarch64 wheels of the hashed lock (numpy, msgpack, psutil, tornado, pyyaml carry
native aarch64 code); only the runtime stage's apt runs under qemu. The image then runs under
qemu-user-static: imports compute, console scripts start, every ELF file is an aarch64 file whose
NEEDED libraries the loader finds, and the doctor answers without a traceback."""

from __future__ import annotations

import json
import subprocess

import pytest

from rapidship.engine import ENGINE
from support.commands import CPU_VARIANT, ROOT, invoke

pytestmark = pytest.mark.docker
ARCH = "arm64"


@pytest.fixture(scope="module")
def arm64_base(engine) -> dict:
    """The arm64 base this run makes under qemu-user-static: its record as `invoke base` wrote it."""
    from rapidship.config.matrix import load_matrix, run_id
    from rapidship.records import Workspace

    invoke("base", "--os", "debian12", "--arch", ARCH)
    name = load_matrix(ROOT / "variants.yaml").variants[CPU_VARIANT].bases.runtime
    return json.loads(Workspace(ROOT / "build").base(name, ARCH, run_id()).read_text())


@pytest.fixture(scope="module")
def arm64_image(arm64_base):
    from rapidship.imagebuild.buildkit import read_record
    from rapidship.records import Workspace

    invoke("base", "--os", "debian12")
    invoke("build", "--variant", CPU_VARIANT, "--arch", ARCH)
    return read_record(Workspace(ROOT / "build"), CPU_VARIANT, ARCH)


def run(ref: str, *argv: str, entrypoint: str = "/opt/rapids/bin/python") -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", "--platform", f"linux/{ARCH}", "--entrypoint", entrypoint, ref, *argv],
                          capture_output=True, text=True, check=False, timeout=600)


def test_the_arm64_base_is_this_runs_own_and_runs_as_aarch64(arm64_base):
    """Made under qemu like the amd64 base (SOURCE_DATE_EPOCH, normalised layers by package): an arm64
    image by its config, under this run's own name, whose programs run as aarch64."""
    from rapidship.config.matrix import run_id

    info = ENGINE.inspect(arm64_base["ref"])
    assert info["Id"] == arm64_base["image_id"] and arm64_base["ref"].endswith(f"-{ARCH}-{run_id()}")
    assert (info["Architecture"], info.get("Variant"), info["Created"]) == (ARCH, "v8", "2000-01-01T00:00:00Z")
    assert len(info["RootFS"]["Layers"]) == len(arm64_base["layers"]) > 10 and arm64_base["layers"][-1]["name"] == "dpkg-state"
    assert "libc6" in arm64_base["inputs"]["packages"] and any("libc6" in layer["packages"] for layer in arm64_base["layers"])
    proc = subprocess.run(["docker", "run", "--rm", "--platform", f"linux/{ARCH}", arm64_base["image_id"], "uname", "-m"],
                          capture_output=True, text=True, check=False, timeout=120)
    assert (proc.returncode, proc.stdout.strip()) == (0, "aarch64"), proc.stderr


def test_the_builder_ran_on_this_machine_and_the_runtime_is_arm64(arm64_image):
    bases = arm64_image.extra["bases"]
    assert ENGINE.inspect(bases["BUILDER_BASE"]["id"])["Architecture"] == "amd64"
    assert ENGINE.inspect(bases["RUNTIME_BASE"]["id"])["Architecture"] == ARCH
    assert ENGINE.inspect(arm64_image.image_id)["Architecture"] == ARCH
    log = open(ROOT / arm64_image.log).read()
    # each layer's stage, on this machine, installs its part of arm64's lock (install_layer.py gives pip
    # the arch's platform tags); BuildKit's log shows the step with TARGETARCH filled in
    assert f'--lock "/tmp/part/requirements-{ARCH}.txt" --arch "{ARCH}"' in log


def test_it_runs_under_qemu_with_native_aarch64_code(arm64_image):
    proc = run(arm64_image.image_id, "-c", "import platform, numpy, msgpack, psutil, yaml, distributed; "
               "print(platform.machine(), int(numpy.arange(10).sum()), msgpack.unpackb(msgpack.packb([1, 2])), "
               "yaml.__with_libyaml__ if hasattr(yaml, '__with_libyaml__') else '-', distributed.__version__)")
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    assert words[:4] == ["aarch64", "45", "[1,", "2]"]
    # numpy's extension modules are aarch64 code (the lock's x86_64 wheel would not even load here)
    found = run(arm64_image.image_id, "-c", "import numpy._core._multiarray_umath as m; print(m.__file__)")
    assert found.stdout.strip().endswith("aarch64-linux-gnu.so"), found


def test_console_scripts_point_at_the_runtime_interpreter(arm64_image):
    proc = run(arm64_image.image_id, "--version", entrypoint="/opt/rapids/bin/dask")
    assert proc.returncode == 0 and "dask" in (proc.stdout + proc.stderr).lower(), proc
    shebang = run(arm64_image.image_id, "-c", "print(open('/opt/rapids/bin/dask').readline().strip())")
    assert shebang.stdout.strip() in ("#!/opt/rapids/bin/python", "#!/opt/rapids/bin/python3.11")
    link = run(arm64_image.image_id, "-c", "import os, sys; print(os.path.realpath(sys.executable))")
    assert link.stdout.strip() == "/usr/bin/python3.11"  # the base's interpreter, not the builder's


def test_every_elf_file_is_aarch64_and_finds_its_libraries(arm64_image):
    proc = run(arm64_image.image_id, "-m", "rapids_runtime.linkage", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    report = json.loads(proc.stdout)
    assert report["machine"] == "aarch64" and report["elf_files"] > 100 and not report["wrong_machine"]
    assert not report["missing"] and report["linked"] == report["needed"]


def test_the_doctor_answers_on_arm64_without_a_traceback(arm64_image):
    proc = run(arm64_image.image_id, "--json", entrypoint="/usr/local/bin/rapids-doctor")
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), proc
    doc = json.loads(proc.stdout)
    gpu = doc["facts"]["gpu"]  # what the amd64 image says too: no NVML in a CPU image, no GPU, nothing fatal
    assert gpu["available"] is False and gpu["gpus"] == [] and doc["ok"] is True and doc["fatal"] == []
