"""Two builds of cpu-debian12 from one lock give the same env content (path, mode, size, sha256 of
every file), though not the same image digest: BuildKit 0.8 in dockerd 20.10 stamps build times."""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import replace

import pytest

from support.commands import ROOT

pytestmark = pytest.mark.docker


def test_a_second_build_without_cache_has_the_same_content_manifest(cpu_image, tmp_path):
    from rapidship.imagebuild.buildkit import BuildSecrets, build, local_base_args, plan_build
    from rapidship.config.matrix import Arch, load_matrix
    from rapidship.image import snapshot
    from rapidship.records import Rendered, Workspace
    from rapidship import content

    v = load_matrix(ROOT / "variants.yaml").get(cpu_image.variant)
    ws = Workspace(ROOT / "build")
    rendered = ws.load(ws.render(v.id), Rendered, "invoke render")
    secrets = BuildSecrets.from_flags(None, None, None)
    again = f"rapidship-test-{uuid.uuid4().hex[:10]}/repro:again"
    plan = plan_build(v, Arch.amd64, rendered, secrets, no_cache=True)
    plan = replace(plan, ref=again, base_args=local_base_args(v, Arch.amd64))
    try:
        second = build(plan, secrets, v, tmp_path / "again.log")
        first = content.manifest(snapshot(cpu_image.ref, hash_under=content.ROOTS), v.id, "amd64", cpu_image.image_id)
        rebuilt = content.manifest(snapshot(again, hash_under=content.ROOTS), v.id, "amd64", second.image_id)
    finally:
        subprocess.run(["docker", "rmi", again], capture_output=True, check=False)
    assert second.cached_steps <= 1 < second.total_steps  # really rebuilt (the one: the base's metadata)
    assert first.files > 2000 and first.bytes > 50_000_000  # the whole env: 2,346 files, 88 MB
    assert content.compare(first, rebuilt) == []
    assert first.digest == rebuilt.digest
    print(f"content {first.digest[:19]} both; image ids {cpu_image.image_id[:19]} vs {second.image_id[:19]}")
