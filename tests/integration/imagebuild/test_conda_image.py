"""A conda variant built for real: local channel -> lock -> render -> BuildKit build -> run.

The same code path users run (`lock_conda`, `render`, `plan_build`, `build`, which the invoke tasks
call), with a test variants file (a conda variant on debian12, so the locally bootstrapped bases
work) and a channel of real `.conda` packages served on 127.0.0.1. The builder reaches it with
`--network host` (the build option for mirrors on the build machine). The mirror URL carries
credentials, which must reach neither the lock, the image, its history nor the build log.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import replace
import subprocess
from pathlib import Path

import pytest

from support.channel_server import serve
from support.commands import invoke
from support.local_channel import DATA_TEXT, PLACEHOLDER, TEST_ENV, TEST_VARIANTS, build_channel

from support.commands import ROOT  # noqa: E402

from rapidship.imagebuild.buildkit import BuildSecrets, build, local_base_args, plan_build  # noqa: E402
from rapidship.records import Workspace  # noqa: E402
from rapidship.lock.conda import lock_conda  # noqa: E402
from rapidship.lock.pip import load_env_spec  # noqa: E402
from rapidship.config.matrix import Arch, load_matrix  # noqa: E402
from rapidship.render.dockerfile import BUILD_PREFIX, PREFIX, render  # noqa: E402
from rapidship.image import exported_members as iter_export  # noqa: E402
from rapidship.imagebuild.size_report import report  # noqa: E402

pytestmark = pytest.mark.docker
USER, PASSWORD = "mirror-robot", "pw-7f3a9c1e"


@pytest.fixture(scope="module")
def conda_image(engine, tmp_path_factory):
    """Build the test conda variant once; yield (BuiltImage, build log text, lock text)."""
    import uuid

    invoke("base", "--os", "debian12")
    invoke("base", "--os", "debian12", "--conda-builder")
    work = tmp_path_factory.mktemp("conda-image")
    channel = work / "channel"
    build_channel(channel / "rtest", work / "pkgwork")
    name = f"rapidship-test-{uuid.uuid4().hex[:10]}/conda"
    (work / "variants.yaml").write_text(TEST_VARIANTS.format(image=name))
    (work / "envs").mkdir()
    (work / "envs/rtest.yaml").write_text(TEST_ENV)
    (work / "locks").mkdir()
    shutil.copy(ROOT / "locks/tools.txt", work / "locks/tools.txt")
    matrix = load_matrix(work / "variants.yaml")
    variant = matrix.get("cpu-debian12")
    with serve(channel, user=USER, password=PASSWORD) as (port, seen):
        mirror = f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/rtest"
        [lock] = lock_conda(load_env_spec("rtest", work / "envs"), matrix, [mirror], work / "locks")
        rendered = render(variant, out_root=work / "build", locks=work / "locks")
        secrets = BuildSecrets.from_flags(None, None, [mirror])
        plan = plan_build(variant, Arch.amd64, rendered, secrets, network="host", epoch=1796000000)
        # the bases this run made, as `invoke build` takes them (its base records, not a shared name)
        plan = replace(plan, base_args=local_base_args(variant, Arch.amd64, Workspace(ROOT / "build")))
        built = build(plan, secrets, variant, work / "build.log")
    assert any(p.endswith(".conda") for p in seen), "the builder did not fetch from the mirror"
    yield built, (work / "build.log").read_text(), lock.read_text(), Path(rendered.dockerfile).read_text()
    subprocess.run(["docker", "rmi", "-f", built.ref], capture_output=True, check=False)


def _run(ref: str, *args: str, user: str | None = None) -> subprocess.CompletedProcess:
    cmd = ["docker", "run", "--rm", "-e", "RAPIDS_DOCTOR=off"]  # the test env has no python for the doctor
    cmd += ["--user", user] if user else []
    return subprocess.run(cmd + [ref, *args], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("user", [None, f"{random.randint(100000, 2**31 - 2)}:0"], ids=["uid1001", "random-uid"])
def test_the_packed_env_runs_from_opt_rapids(conda_image, user):
    built = conda_image[0]
    who = _run(built.ref, "id", "-u", user=user)
    assert who.stdout.strip() == (user.split(":")[0] if user else "1001")
    hello = _run(built.ref, "rtest-hello", user=user)  # the ELF binary, its prefix rewritten in place
    assert hello.returncode == 0, hello.stderr
    assert hello.stdout == f"data-path={PREFIX}/share/rtest/data.txt\ndata={DATA_TEXT}"
    greet = _run(built.ref, "rtest-greet", user=user)  # entry point: shebang into the env
    assert greet.returncode == 0, greet.stderr
    assert greet.stdout.endswith(f"script={PREFIX}/bin/rtest-greet\n")
    conf = _run(built.ref, "cat", f"{PREFIX}/etc/rtest/rtest.conf", user=user)  # text prefix
    assert conf.stdout == f"data={PREFIX}/share/rtest/data.txt\n"


def test_the_image_holds_no_trace_of_the_build_prefix_nor_the_mirror_credentials(conda_image):
    built, log, lock, dockerfile = conda_image
    assert BUILD_PREFIX in dockerfile  # the builder really installed there...
    needles = [BUILD_PREFIX.encode(), PASSWORD.encode(), USER.encode()]
    seen_env = False
    for member, tar in iter_export(built.ref):
        if member.name.lstrip("./").startswith("opt/rapids/"):
            seen_env = True
        if not member.isfile():
            assert BUILD_PREFIX not in (member.linkname or ""), member.name
            continue
        data = tar.extractfile(member).read()
        for needle in needles:  # ...and no exported file names it, nor the mirror's credentials
            assert needle not in data, f"{member.name} carries {needle!r}"
        if member.name.startswith("opt/rapids/") and "/conda-meta/" not in f"/{member.name}":
            assert PLACEHOLDER.encode() not in data, member.name  # conda-meta records it as package metadata
    assert seen_env
    history = subprocess.run(["docker", "history", "--no-trunc", built.ref], capture_output=True, text=True, check=True)
    inspect = subprocess.run(["docker", "image", "inspect", built.ref], capture_output=True, text=True, check=True)
    for text in (history.stdout, inspect.stdout, log, lock):
        assert PASSWORD not in text and USER not in text


def test_the_runtime_gets_only_the_packed_env_no_installer_no_conda(conda_image):
    built = conda_image[0]
    names = {m.name.lstrip("./") for m, _ in iter_export(built.ref)}
    assert "opt/rapids/bin/rtest-hello" in names
    assert not [n for n in names if n.startswith(("opt/installer", "opt/rapidship-build", "root/.cache"))]
    tools = {"conda", "mamba", "micromamba", "rattler", "conda-pack", "gcc", "cc", "pip", "pip3"}
    assert not [n for n in names if n.split("/")[-2:-1] in (["bin"], ["sbin"]) and n.split("/")[-1] in tools]
    assert "opt/rapids/include/rtest.h" not in names and "opt/rapids/lib/librtest.a" not in names


def test_size_report_reads_the_trims_the_builder_measured(conda_image):
    built = conda_image[0]
    rep = report(built.ref, variant="cpu-debian12", arch="amd64", image_bytes=built.size_bytes,
                 zstd_bytes=built.zstd_bytes, budget_bytes=4_700_000_000, top=100_000)
    assert rep.within_budget and rep.files_bytes < built.size_bytes
    assert rep.trims["style"] == "pack"
    assert rep.trims["patterns"]["include/*"] == 64 * len("int rtest(void);\n")
    assert rep.trims["patterns"]["*.a"] == 8 + 4096
    assert any(p.path == "/opt/rapids/bin/rtest-hello" for p in rep.largest_files)
    assert [p.bytes for p in rep.largest_files] == sorted((p.bytes for p in rep.largest_files), reverse=True)
