"""A conda variant built for real: local channel -> lock -> render -> BuildKit build -> run.

The same code path users run (`lock_conda`, `render`, `plan_build`, `build`, which the invoke tasks
call), with a test variants file (a conda variant on debian12, so the locally bootstrapped bases
work) and a channel of real `.conda` packages served on 127.0.0.1. The builder reaches it with
`--network host` (the build option for mirrors on the build machine). The mirror URL carries
credentials, which must reach neither the lock, the image, its history nor the build log.

The env is planned in layers as a pip env is (two packages over the group limit alone, the small
ones grouped by kind, the env's history last): each layer installed and packed by conda-pack in its
own stage, relocated on its own, a copy of a lower layer's file linked down; then one package is
patched and only its layer's stages run again.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from dataclasses import replace
import subprocess
from pathlib import Path

import pytest

from support.channel_server import serve
from support.commands import invoke
from support.local_channel import (DATA_TEXT, PLACEHOLDER, SHARED, TEST_ENV_LAYERED, TEST_VARIANTS,
                                   add_layered_packages, build_channel)

from support.commands import ROOT  # noqa: E402

from rapidship.imagebuild.buildkit import BuildSecrets, build, local_base_args, plan_build  # noqa: E402
from rapidship.records import Workspace  # noqa: E402
from rapidship.lock.conda import lock_conda  # noqa: E402
from rapidship.lock.pip import load_env_spec  # noqa: E402
from rapidship.config.matrix import Arch, load_matrix  # noqa: E402
from rapidship.render.dockerfile import BUILD_PREFIX, PREFIX, render  # noqa: E402
from rapidship.image import exported_members as iter_export, saved_image  # noqa: E402
from rapidship.imagebuild.normalise import layer_steps  # noqa: E402
from rapidship.imagebuild.size_report import report  # noqa: E402

pytestmark = pytest.mark.docker
USER, PASSWORD = "mirror-robot", "pw-7f3a9c1e"


def _project(work: Path, name: str):
    (work / "variants.yaml").write_text(TEST_VARIANTS.format(image=name))
    (work / "envs").mkdir()
    (work / "envs/rtest.yaml").write_text(TEST_ENV_LAYERED)
    (work / "locks").mkdir()
    shutil.copy(ROOT / "locks/tools.txt", work / "locks/tools.txt")
    matrix = load_matrix(work / "variants.yaml")
    return matrix, matrix.get("cpu-debian12")


def _lock_and_build(work: Path, channel: Path, matrix, variant, log: Path, port: int, no_cache: bool = False,
                    relock: bool = True):
    mirror = f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/rtest"
    [lock] = lock_conda(load_env_spec("rtest", work / "envs"), matrix, [mirror], work / "locks") if relock else \
        [work / "locks/rtest/py3.11-cpu/conda-amd64.lock"]
    rendered = render(variant, out_root=work / "build", locks=work / "locks")
    secrets = BuildSecrets.from_flags(None, None, [mirror])
    plan = plan_build(variant, Arch.amd64, rendered, secrets, network="host", epoch=1796000000, no_cache=no_cache)
    # the bases this run made, as `invoke build` takes them (its base records, not a shared name)
    plan = replace(plan, base_args=local_base_args(variant, Arch.amd64, Workspace(ROOT / "build")))
    return build(plan, secrets, variant, log), lock.read_text(), Path(rendered.dockerfile).read_text()


@pytest.fixture(scope="module")
def conda_project(engine, tmp_path_factory):
    """The test conda variant's project, channel and server; the image's name is removed at the end."""
    import uuid

    invoke("base", "--os", "debian12")
    invoke("base", "--os", "debian12", "--conda-builder")
    work = tmp_path_factory.mktemp("conda-image")
    channel = work / "channel"
    build_channel(channel / "rtest", work / "pkgwork")
    name = f"rapidship-test-{uuid.uuid4().hex[:10]}/conda"
    add_layered_packages(channel / "rtest", work / "pkgwork", seed=name)
    matrix, variant = _project(work, name)
    with serve(channel, user=USER, password=PASSWORD) as (port, seen):
        yield work, channel, matrix, variant, port, seen
    for ref in subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", name], capture_output=True,
                              text=True, check=False).stdout.split():
        subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, check=False)


@pytest.fixture(scope="module")
def conda_image(conda_project):
    """Build the test conda variant once; yield (BuiltImage, build log text, lock text, Dockerfile)."""
    work, channel, matrix, variant, port, seen = conda_project
    built, lock, dockerfile = _lock_and_build(work, channel, matrix, variant, work / "build.log", port)
    assert any(p.endswith(".conda") for p in seen), "the builder did not fetch from the mirror"
    return built, (work / "build.log").read_text(), lock, dockerfile


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


def test_the_image_passes_every_image_gate(conda_image, conda_project):
    """The gates a release runs, given the mirror as the build had it: the env is root-owned and
    read-only to the runtime user (an entry point the installer made group-writable is not)."""
    from rapidship.gates.run import run_gates

    work, _, _, variant, port, _ = conda_project
    mirror = f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/rtest"
    rendered = render(variant, out_root=work / "build", locks=work / "locks")
    reports, _, _, _ = run_gates(variant, conda_image[0], BuildSecrets.from_flags(None, None, [mirror]),
                                 rendered.lock_sha256, on_gate=lambda g: None, facts_root=None)
    failed = {r.gate: r.reasons for r in reports if not r.passed}
    # the user gate starts the image's entrypoint, whose doctor needs a Python: the stand-in python of
    # this channel is a record without an interpreter (the RAPIDS-scale chain holds it: docs/conda.md)
    assert "/opt/rapids/bin/python: not found" in " ".join(failed.pop("user", ["/opt/rapids/bin/python: not found"]))
    assert failed == {}, failed


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


def _env_layers(ref: str) -> dict[str, str]:
    """Each env layer's diff_id, by the planned layer its COPY names (the history the delta-cost
    table and the normaliser read)."""
    config = next(json.load(stream) for kind, _, stream in saved_image(ref) if kind == "config")
    named = [re.search(r"/out/layers/(\S+?)/ /opt/rapids/", step) for step in layer_steps(config)]
    return {m.group(1): diff_id for m, diff_id in zip(named, config["rootfs"]["diff_ids"]) if m}


def _plan(conda_project) -> dict:
    work, _, _, variant, _, _ = conda_project
    return json.loads((work / "build" / variant.id / "builder" / "layer-plan.json").read_text())


def test_the_env_is_planned_per_package_and_each_layer_is_its_own_image_layer(conda_image, conda_project):
    built = conda_image[0]
    plan = _plan(conda_project)
    layers = {layer["name"]: sorted(d["name"] for d in layer["distributions"]) for layer in plan["layers"]}
    assert layers == {"compiled/rtest-big": ["rtest-big"], "compiled/rtest-twin": ["rtest-twin"],
                      "compiled/small_1": ["python", "rtest-hello"], "python/small_1": ["rtest-data", "rtest-pylib"],
                      "env": []}
    assert list(layers)[-1] == "env" and plan["rest"] == "env"
    history = subprocess.run(["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", built.ref],
                             capture_output=True, text=True, check=True).stdout
    for name in layers:  # one COPY, so one image layer, per planned layer
        assert history.count(f"/out/layers/{name}/ /opt/rapids/") == 1, name
    held = _run(built.ref, "cat", "/opt/rapidship/layers.json")
    kept = {layer["name"]: layer for layer in json.loads(held.stdout)["layers"]}
    for layer in kept.values():  # every package's files counted in its own layer (conda-meta names them)
        for d in layer["distributions"]:
            assert d["files"] > 0, (layer["name"], d)
    assert kept["env"]["files"] == 1   # conda-meta/history, once for the env


def test_every_layer_is_relocated_on_its_own(conda_image):
    """The relocation test per layer: no layer's bytes name the build prefix, each package's
    conda-meta record lies in its layer, the noarch entry point's shebang is the env's python."""
    built = conda_image[0]
    metas: dict[str, list[str]] = {}
    for kind, entry, stream in saved_image(built.ref):
        if kind != "file" or entry is None or not entry.path.startswith("/opt/rapids/"):
            continue
        data = stream.read() if stream is not None else b""
        assert BUILD_PREFIX.encode() not in data, f"{entry.path} in layer {entry.layer}"
        if entry.path.startswith("/opt/rapids/conda-meta/") and entry.path.endswith(".json"):
            metas.setdefault(entry.layer, []).append(json.loads(data)["name"])
    assert sorted(sorted(names) for names in metas.values()) == [
        ["python", "rtest-hello"], ["rtest-big"], ["rtest-data", "rtest-pylib"], ["rtest-twin"]]
    script = _run(built.ref, "head", "-1", f"{PREFIX}/bin/rtest-py")
    assert script.stdout == f"#!{PREFIX}/bin/python3.11\n"   # written by the installer, rewritten by conda-pack
    ran = _run(built.ref, "rtest-py", user="4242:0")
    assert ran.returncode == 0 and ran.stdout.startswith(f"stand-in python {PREFIX}/bin/rtest-py"), ran
    pyc = _run(built.ref, "ls", f"{PREFIX}/lib/python3.11/site-packages/rtest_pylib/__pycache__")
    assert pyc.stdout.split() == ["__init__.cpython-311.pyc"]   # compiled as conda compiles noarch sources


def test_a_copy_of_a_lower_layers_file_links_down(conda_image):
    built = conda_image[0]
    link = _run(built.ref, "readlink", f"{PREFIX}/share/rtest-twin/shared.bin")
    assert link.stdout.strip() == "../rtest-big/shared.bin"
    same = _run(built.ref, "sha256sum", f"{PREFIX}/share/rtest-twin/shared.bin")
    assert same.stdout.split()[0] == hashlib.sha256(SHARED).hexdigest()


def test_a_rebuild_without_the_cache_gives_the_same_image(conda_image, conda_project):
    """Every layer installed, packed and compiled again from nothing: the same id (what `invoke
    reproduce` checks), so a conda image's digest is a claim anyone can rebuild."""
    work, channel, matrix, variant, port, _ = conda_project
    again, _, _ = _lock_and_build(work, channel, matrix, variant, work / "again.log", port, no_cache=True,
                               relock=False)
    assert "CACHED" not in "".join(line for line in (work / "again.log").read_text().splitlines(keepends=True)
                                   if "pack_layer" in line)
    assert again.image_id == conda_image[0].image_id


def test_a_patch_of_one_package_installs_and_packs_only_its_layer_again(conda_image, conda_project):
    """rtest-big 1.0 -> 1.1 in the channel, locked again: the stages that make and link its layer run,
    the index of large files and the records (the blob changed), and the runtime's step after the
    COPYs; no other layer's install, pack, prune or link step, and not the runtime's apt step."""
    first = conda_image[0]
    work, channel, matrix, variant, port, _ = conda_project
    add_layered_packages(channel / "rtest", work / "pkgwork-1.1", big_version="1.1", only_big=True,
                         seed=variant.image)
    log = work / "patch.log"
    second, lock, _ = _lock_and_build(work, channel, matrix, variant, log, port)
    assert '"rtest-big-1.1-h0_0.conda"' in lock
    blob = f"{PREFIX}/share/rtest-big/blob.bin"
    assert _run(second.image_id, "sha256sum", blob).stdout != _run(first.image_id, "sha256sum", blob).stdout
    text = log.read_text()
    cached = set(re.findall(r"^#(\d+) CACHED", text, re.M))
    steps = re.findall(r"^#(\d+) \[([\w-]+) +\d+/\d+\] (.*)$", text, re.M)
    ran = sorted({stage for n, stage, line in steps if n not in cached and line.startswith("RUN")})
    big = next(n for n, layer in enumerate(_plan(conda_project)["layers"], 1) if layer["name"] == "compiled/rtest-big")
    assert ran == sorted([f"env-{big}-made", f"env-{big}", "env-index", "env-records", "runtime"]), ran
    apt = next(n for n, stage, line in steps if stage == "runtime" and "apt-get" in line)
    assert apt in cached
    assert second.image_id != first.image_id
    # what a delta disc of the patch carries: of the env's layers, only the patched package's is new
    before, after = (_env_layers(ref) for ref in (first.image_id, second.image_id))
    assert before.keys() == after.keys()
    assert [name for name in after if after[name] != before[name]] == ["compiled/rtest-big"]
    assert _run(second.ref, "readlink", f"{PREFIX}/share/rtest-twin/shared.bin").stdout.strip() == "../rtest-big/shared.bin"
