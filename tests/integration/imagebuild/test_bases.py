"""Bases by content, against the real engine: two runs with their own RAPIDSHIP_RUN_ID on one engine,
interleaved (base, build, base, build, build again), each build on its own run's base id, neither
run moving the other's; and a base from an archive that has moved on refused by `invoke reproduce`
naming the package versions that differ."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support.commands import CPU_VARIANT, ROOT, invoke

pytestmark = pytest.mark.docker

RUN = os.environ["RAPIDSHIP_RUN_ID"]


def _base_record(where: Path, run: str) -> dict:
    from rapidship.config.matrix import load_matrix
    from rapidship.records import Workspace

    name = load_matrix(ROOT / "variants.yaml").variants[CPU_VARIANT].bases.runtime
    return json.loads(Workspace(where / "build").base(name, "amd64", run).read_text())


def _engine_id(ref: str) -> str:
    got = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return got.stdout.strip()


def _build_base(where: Path) -> dict:
    return json.loads((where / "build" / CPU_VARIANT / "build-amd64.json").read_text())["extra"]["bases"]["RUNTIME_BASE"]


def test_two_runs_interleaved_on_one_engine_each_build_on_its_own_base(cpu_image, tmp_path):
    """Run 1 (this suite) made its base and built (the cpu_image fixture); run 2, in another
    directory, makes its base afresh (--force) and builds; run 1 builds again."""
    first = _base_record(ROOT, RUN)
    assert _build_base(ROOT)["ref"] == first["ref"] and _build_base(ROOT)["id"] == first["image_id"]

    other = tmp_path / "other-run"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(other)], check=True)
    env = dict(os.environ, RAPIDSHIP_RUN_ID=RUN + "b")
    second_ref = ""
    try:
        made = subprocess.run(["invoke", "base", "--os", "debian12", "--force"], cwd=other, env=env, capture_output=True,
                              text=True)
        assert made.returncode == 0, made.stdout + made.stderr
        second = _base_record(other, RUN + "b")
        second_ref = second["ref"]
        assert second_ref != first["ref"] and second_ref.endswith(f"-{RUN}b")
        assert second["image_id"] == first["image_id"]  # one archive state, two directories: one id
        assert _engine_id(first["ref"]) == first["image_id"]  # run 1's base did not move
        built = subprocess.run(["invoke", "build", "--variant", CPU_VARIANT, "--arch", "amd64"], cwd=other, env=env,
                               capture_output=True, text=True)
        assert built.returncode == 0, built.stdout + built.stderr
        assert _build_base(other)["ref"] == second_ref and _build_base(other)["id"] == second["image_id"]

        invoke("build", "--variant", CPU_VARIANT, "--arch", "amd64")  # run 1 again, after run 2's base
        again = _build_base(ROOT)
        assert again["ref"] == first["ref"] and again["id"] == first["image_id"] == cpu_image.extra["bases"][
            "RUNTIME_BASE"]["id"]
        rebuilt = json.loads((ROOT / "build" / CPU_VARIANT / "build-amd64.json").read_text())
        assert rebuilt["image_id"] == cpu_image.image_id  # same inputs, same base: the same image
    finally:
        refs = [r for r in (second_ref, f"{cpu_image.ref}b") if r]
        subprocess.run(["docker", "rmi", *refs], capture_output=True, check=False)  # run 2's names only


def test_a_base_from_an_archive_that_moved_on_is_refused_naming_the_versions(cpu_image, tmp_path):
    """The record says the image was built on a base whose libc6 was another version (the archive
    as it was then); this run's base is today's: reproduce names that package, before building."""
    doc = json.loads((ROOT / "build" / CPU_VARIANT / "build-amd64.json").read_text())
    used = doc["extra"]["bases"]["RUNTIME_BASE"]
    today = used["inputs"]["packages"]["libc6"]
    used["inputs"]["packages"]["libc6"] = "2.36-9+deb12u1"
    used["id"] = "sha256:" + "0" * 64
    record = tmp_path / "build-amd64.json"
    record.write_text(json.dumps(doc))
    proc = invoke("reproduce", "--variant", CPU_VARIANT, "--arch", "amd64", "--digest", cpu_image.image_id,
                  "--record", str(record), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "the archive has moved on since" in said and f"libc6 2.36-9+deb12u1 then, {today} now" in said
