"""The runtime package as the image carries it (`rapids_runtime`, copied by render): every module
imports with the standard library alone, and every program answers by the names the images,
templates and docs call it by."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rapidship.render.dockerfile import _copy_runtime

RUNTIME_SRC = Path(__file__).resolve().parents[3] / "src" / "rapidship" / "runtime"


@pytest.fixture(scope="module")
def image_runtime(tmp_path_factory) -> Path:
    """What `COPY runtime/rapids_runtime/ /opt/rapidship/rapids_runtime/` puts into the image."""
    dest = tmp_path_factory.mktemp("ctx") / "runtime"
    _copy_runtime(dest)
    return dest


def bare_python(root: Path, *args: str) -> subprocess.CompletedProcess:
    """The image's interpreter as the launchers start it, without site-packages (-S): stdlib only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "RAPIDS", "DASK_"))}
    env["PYTHONPATH"] = str(root)
    return subprocess.run([sys.executable, "-S", *args], env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_image_carries_every_module_of_the_package(image_runtime):
    carried = {p.name for p in (image_runtime / "rapids_runtime").iterdir()}
    assert carried == {p.name for p in RUNTIME_SRC.glob("*.py")}


def test_every_module_imports_with_the_standard_library_alone(image_runtime):
    names = sorted(p.stem for p in (image_runtime / "rapids_runtime").glob("*.py") if p.stem != "__init__")
    code = "import importlib\n" + "".join(f"importlib.import_module('rapids_runtime.{n}')\n" for n in names)
    proc = bare_python(image_runtime, "-c", code)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("module, prog", [("doctor", "rapids-doctor"), ("smoke", "rapids-smoke"),
                                          ("cluster", "python -m rapids_runtime.cluster"),
                                          ("linkage", "python -m rapids_runtime.linkage")])
def test_every_program_answers_as_python_dash_m(image_runtime, module, prog):
    proc = bare_python(image_runtime, "-m", f"rapids_runtime.{module}", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {prog}")


@pytest.mark.parametrize("launcher", ["rapids-doctor", "rapids-smoke"])
def test_the_launchers_start_their_program(image_runtime, tmp_path, launcher):
    """bin/ as the image installs it to /usr/local/bin, with the env's python at $RAPIDS_PREFIX."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "RAPIDS", "DASK_"))}
    env.update(RAPIDS_PREFIX=str(tmp_path), PYTHONPATH=str(image_runtime))
    proc = subprocess.run(["sh", str(image_runtime / "bin" / launcher), "--help"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {launcher}")
