"""A fleet per arch: the rendered Dockerfile's last stages, built by the real BuildKit for each arch,
give each arch's image its own io.rapidship.gpu.archs (FROM runtime-${TARGETARCH} picks the stage).
The shared stage is swapped for a FROM scratch one here; the heavy RAPIDS build runs the whole file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from rapidship.config.matrix import parse_matrix
from rapidship.engine import ENGINE
from rapidship.render.dockerfile import render
from support.commands import ROOT

pytestmark = pytest.mark.docker


def test_each_arch_image_is_labelled_with_its_own_fleet(engine, tmp_path, unique_name, monkeypatch):
    monkeypatch.chdir(ROOT)
    doc = yaml.safe_load((ROOT / "variants.yaml").read_text())
    doc["overrides"]["cuda12-debian12"]["gpu_archs"] = {"amd64": [80, 90], "arm64": [90, 121]}
    variant = parse_matrix(yaml.safe_dump(doc), "variants.yaml").variants["cuda12-debian12"]
    text = Path(render(variant, out_root=tmp_path).dockerfile).read_text()
    tail = text[text.index("FROM runtime-common AS runtime-amd64"):]
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch AS runtime-common\nCOPY marker /marker\n" + tail)
    (ctx / "marker").write_text("x\n")
    for arch, want in (("amd64", "80,90"), ("arm64", "90,121")):
        ref = f"{unique_name}:{arch}"
        subprocess.run([ENGINE.buildkit_cli(), "build", "-q", "--platform", f"linux/{arch}", "--target", "runtime",
                        "-t", ref, str(ctx)], check=True, capture_output=True, env=dict(os.environ, DOCKER_BUILDKIT="1"))
        try:
            info = ENGINE.inspect(ref)
            assert info["Architecture"] == arch and info["Config"]["Labels"]["io.rapidship.gpu.archs"] == want
        finally:
            subprocess.run(["docker", "rmi", ref], capture_output=True, check=False)


def test_device_code_reads_only_an_image_that_carries_a_prune_record(cpu_image):
    from support.commands import invoke

    run = invoke("device-code", "--variant", "cpu-debian12", "--arch", "amd64", check=False)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "the amd64 image carries no prune record (/opt/rapidship/prune.json)" in " ".join(run.stderr.split())
