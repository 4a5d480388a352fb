"""A conda image at RAPIDS scale, built from the channel made of wheels (docs/conda.md): the plan's
layers, the budget, the delta-cost table, the hardened import, and a real one-package patch that
rebuilds one layer and ships as a delta disc within the goal.

Heavy: a 3.2 GB channel (made once, about 20 minutes, or RAPIDSHIP_WHEELS_CHANNEL names one), two
RAPIDS-scale builds and three discs. Never in CI; run by hand with
`python3 -m pytest -m heavy tests/integration/imagebuild/test_heavy_conda_wheels.py -s` and copy the
figures into docs/measurements (bench/conda_image.py and bench/delta_disc.py print them).
The patch downloads that one wheel from the index, as `bench/conda_channel.py patch` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.commands import ROOT, invoke

from rapidship.imagebuild.delta_cost import measure, summary, within_goal

pytestmark = [pytest.mark.heavy, pytest.mark.docker]
PATCH = os.environ.get("RAPIDSHIP_CONDA_PATCH", "numpy==2.4.5")  # a version the index has, not the lock's
HARDENED = ["--read-only", "--tmpfs", "/tmp", "--user", "4242:0", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]


def _bench(*args: str) -> None:
    subprocess.run([sys.executable, *args], cwd=ROOT, check=True)


def _diff_ids(ref: str) -> list[str]:
    out = subprocess.run(["docker", "image", "inspect", "-f", "{{json .RootFS.Layers}}", ref],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def _keep(ref: str, tag: str) -> str:
    subprocess.run(["docker", "tag", ref, tag], check=True)
    return tag


def test_a_rapids_scale_conda_image_and_its_patch(tmp_path):
    channel = Path(os.environ.get("RAPIDSHIP_WHEELS_CHANNEL", ROOT / "build/conda-channel/wheels"))
    if not (channel / "noarch/repodata.json").is_file():
        _bench("bench/conda_channel.py", "make", "--out", str(channel))
    invoke("base", "--os", "debian12")
    invoke("base", "--os", "debian12", "--conda-builder")
    run = os.environ.get("RAPIDSHIP_RUN_ID", "heavy")
    base, new = tmp_path / "n", tmp_path / "n1"
    _bench("bench/conda_channel.py", "lock", str(channel), "--project", str(base))
    _bench("bench/conda_image.py", "--channel", str(channel), "--project", str(base), "--json", str(tmp_path / "n.json"))
    built = json.loads((tmp_path / "n.json").read_text())
    n = _keep(built["ref"], f"rapidship-bench/wheels:n-{run}")
    made = []
    try:
        made.append(n)
        assert built["size_bytes"] <= 3_500_000_000, f"{built['size_bytes']:,} B with gpu_archs [80, 90]"
        assert built["image_layers"] <= 100
        imported = subprocess.run(["docker", "run", "--rm", *HARDENED, "-e", "RAPIDS_DOCTOR=off", "--entrypoint",
                                   "/opt/rapids/bin/python", n, "-c", "import cudf, cuml, dask_cuda"],
                                  capture_output=True, text=True)
        assert imported.returncode == 0, imported.stderr[-3000:]
        rows, layers = measure(n)
        table = summary(rows, layers)
        assert table["misses"] == 0, json.dumps(table["worst"])
        assert any(row.distribution == "python" for row in rows)  # conda-meta names the env's own Python

        _bench("bench/conda_channel.py", "patch", str(channel), "--pin", PATCH, "--base", str(base), "--project", str(new))
        _bench("bench/conda_image.py", "--channel", str(channel), "--project", str(new), "--json", str(tmp_path / "n1.json"))
        n1 = _keep(json.loads((tmp_path / "n1.json").read_text())["ref"], f"rapidship-bench/wheels:n1-{run}")
        made.append(n1)
        changed = [i for i, (a, b) in enumerate(zip(_diff_ids(n), _diff_ids(n1), strict=True)) if a != b]
        records = {layer.index for layer in layers if layer.env_records}
        name = PATCH.split("==")[0]
        own = next(layer.index for layer in layers if name in layer.distributions)
        assert set(changed) - records == {own}, f"a patch of {name} changed layers {changed}"

        _bench("bench/delta_disc.py", "--base", n, "--new", n1, "--json", str(tmp_path / "disc.json"))
        delta = json.loads((tmp_path / "disc.json").read_text())["runs"]["N+1 delta"]["archive_bytes"]
        own_bytes = next(row.own_bytes for row in rows if row.distribution == name)
        assert within_goal(delta, own_bytes), f"{name}'s delta disc: {delta:,} B for {own_bytes:,} B of its own"
        print(f"\n{n}: {built['size_bytes']:,} B, {built['image_layers']} layers, {built['build_seconds']} s; "
              f"{PATCH}: layers {changed} changed, delta disc {delta:,} B for {own_bytes:,} B")
    finally:
        subprocess.run(["docker", "rmi", *made], capture_output=True)

