"""The pip env's layers, each made on its own: the render splits each arch's lock by the plan's
layers (render/layer_plan.lock_parts), builder/layer_record.py measures each layer's folder (files of
the distribution whose RECORD names them, bytecode with its source) and merges the measures into the
plan; trims, dedupe and prune records merge the same way. A layer holding a distribution its plan
does not give it, a planned layer without a record, or a lock requirement no layer holds, stops the
build with a message naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.commands import ROOT

from rapidship.builder import dedupe, measure_trims
from rapidship.builder.layer_record import Refused, measure, merge
from rapidship.render.layer_plan import REST, Distribution, lock_parts, plan_layers

SCRIPT = ROOT / "src" / "rapidship" / "builder" / "layer_record.py"
SITE = "lib/python3.11/site-packages"
SIZES = {"nvidia-cublas-cu12": (600_000_000, False), "cudf-cu12": (2_800_000, False), "dask-cuda": (115_000, False),
         "dask": (1_500_000, True), "numpy": (18_000_000, False), "toolz": (60_000, True)}
LOCK = """# rapidship pip lock for env x: do not edit
# spec-sha256: 00
cudf-cu12==26.10.2 \\
    --hash=sha256:aa
    # via x
Dask==2026.8.0 \\
    --hash=sha256:bb
nvidia_cublas_cu12==12.9.1.4 ; python_version >= "3.10" \\
    --hash=sha256:cc
numpy==2.4.6 \\
    --hash=sha256:dd
dask-cuda==26.10.0 \\
    --hash=sha256:ee
toolz==1.2.0 \\
    --hash=sha256:ff
"""


def _plan():
    return plan_layers([Distribution(n, "1", size, pure) for n, (size, pure) in SIZES.items()], 80)


def _dist(prefix: Path, folder: str, name: str, files: dict[str, bytes]) -> None:
    info = prefix / SITE / folder
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n\nbody\n")
    rows = []
    for rel, data in files.items():
        path = Path(os.path.normpath(prefix / SITE / rel))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        rows.append(f"{rel},sha256=x,{len(data)}")
    (info / "RECORD").write_text("\n".join(rows + [f"{folder}/RECORD,,", f"{folder}/METADATA,,"]) + "\n")


def test_each_arch_lock_splits_into_its_layers_requirements():
    plan = _plan()
    parts = lock_parts(LOCK, plan)
    assert set(parts) == set(plan.names) - {REST}   # the venv is no wheel's
    assert parts["cuda/nvidia-cublas-cu12"] == 'nvidia_cublas_cu12==12.9.1.4 ; python_version >= "3.10" \\\n    --hash=sha256:cc\n'
    assert parts["rapids/cudf-cu12"].startswith("cudf-cu12==26.10.2 \\\n    --hash=sha256:aa\n    # via x")
    assert "Dask==2026.8.0" in parts["python/dask"] and "toolz" not in parts["python/dask"]
    assert "# rapidship pip lock" not in "".join(parts.values())
    joined = sorted(line for text in parts.values() for line in text.splitlines())
    assert joined == sorted(line for line in LOCK.splitlines() if not line.startswith("# "))   # every line, once
    with pytest.raises(ValueError, match="pandas==3.0.0 is in the lock but in no planned layer"):
        lock_parts(LOCK + "pandas==3.0.0 \\\n    --hash=sha256:00\n", plan)


def test_a_layer_is_measured_per_distribution_bytecode_with_its_source(tmp_path):
    env = tmp_path / "env"
    _dist(env, "cudf_cu12-26.10.2.dist-info", "cudf-cu12", {"cudf/__init__.py": b"x = 1\n", "../../../bin/cudf": b"#!py\n"})
    (env / SITE / "cudf" / "__pycache__").mkdir()
    (env / SITE / "cudf" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"pyc")
    (env / SITE / "cudf" / "link.so").symlink_to("__init__.py")   # dedupe's link: no RECORD names it
    held = measure(env, "rapids/cudf-cu12")
    assert held["files"] == 6 and held["layer"] == "rapids/cudf-cu12"
    # its RECORD's four files and the source's bytecode; the link counts to the layer only
    assert held["distributions"] == {"cudf-cu12": {"files": 5, "bytes": held["bytes"] - len("__init__.py")}}


def _records(plan, tmp_path: Path, stray: str = "") -> list[Path]:
    folders = []
    for n, layer in enumerate(plan.layers, 1):
        folder = tmp_path / "parts" / str(n)
        folder.mkdir(parents=True)
        dists = {d.name: {"files": 2, "bytes": 10} for d in layer.distributions}
        if stray and layer.name == REST:
            dists[stray] = {"files": 1, "bytes": 1}
        (folder / "layer.json").write_text(json.dumps({"layer": layer.name, "files": 3 * len(dists) + 1,
                                                       "bytes": 10 * len(dists) + 5, "distributions": dists}))
        folders.append(folder)
    return folders


def _merge(tmp_path: Path, folders: list[Path]) -> subprocess.CompletedProcess:
    plan = tmp_path / "layer-plan.json"
    plan.write_text(json.dumps(_plan().to_json("locks/x/wheel-sizes.json")))
    return subprocess.run([sys.executable, str(SCRIPT), "merge", "--plan", str(plan), "--out", str(tmp_path / "layers.json"),
                           *map(str, folders)], capture_output=True, text=True, check=False)


def test_the_layers_records_merge_into_the_plan(tmp_path):
    plan = _plan()
    folders = _records(plan, tmp_path)
    proc = _merge(tmp_path, folders[::-1])   # any order: matched by name
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "layers.json").read_text())
    assert [layer["name"] for layer in record["layers"]] == list(plan.names)
    cublas = next(layer for layer in record["layers"] if layer["name"] == "cuda/nvidia-cublas-cu12")
    assert (cublas["files"], cublas["bytes"], cublas["distributions"][0]["bytes"]) == (4, 15, 10)
    assert cublas["why"] == "alone: 600.0 MB wheel"


@pytest.mark.parametrize("wrong", ["a stray distribution", "a layer missing", "a layer twice", "not JSON"])
def test_records_that_do_not_fit_the_plan_stop_the_build(tmp_path, wrong):
    plan = _plan()
    folders = _records(plan, tmp_path, stray="pandas" if wrong == "a stray distribution" else "")
    if wrong == "a layer missing":
        folders = folders[1:]
    elif wrong == "a layer twice":
        folders.append(folders[0])
    elif wrong == "not JSON":
        (folders[0] / "layer.json").write_text("{")
    proc = _merge(tmp_path, folders)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "render the variant again (invoke render)" in proc.stderr
    said = {"a stray distribution": "layer venv holds distribution(s) its plan does not give it: pandas",
            "a layer missing": f"no record for planned layer {plan.names[0]}",
            "a layer twice": f"two records for layer {plan.names[0]}", "not JSON": "not a layer record"}[wrong]
    assert said in proc.stderr
    with pytest.raises(Refused):
        merge(_plan().to_json("x"), [])


def test_trims_and_dedupe_records_merge_as_one_env_s():
    a = {"style": "find", "before_bytes": 10, "trimmed_bytes": 4, "after_bytes": 6, "pyc_bytes": 1,
         "patterns": {"*.a": 4, "*/tests": 0}, "why": {"*.a": "static", "*/tests": "tests"}}
    b = {**a, "before_bytes": 5, "trimmed_bytes": 5, "after_bytes": 0, "pyc_bytes": 0, "patterns": {"*.a": 0, "*/tests": 5}}
    assert measure_trims.merge([a, b]) == {"style": "find", "before_bytes": 15, "trimmed_bytes": 9, "after_bytes": 6,
                                           "pyc_bytes": 1, "patterns": {"*.a": 4, "*/tests": 5}, "why": a["why"]}
    one = {"schema_version": 1, "linked": 1, "saved_bytes": 7, "links": [{"path": "z", "to": "y"}]}
    two = {"schema_version": 1, "linked": 1, "saved_bytes": 3, "links": [{"path": "a", "to": "b"}]}
    assert dedupe.merge([one, two]) == {"schema_version": 1, "linked": 2, "saved_bytes": 10,
                                        "links": [{"path": "a", "to": "b"}, {"path": "z", "to": "y"}]}
