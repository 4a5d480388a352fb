"""A base by its run's own name and record: names, what the record reads from the real tools'
output, and a build that takes (or refuses) the base its record names."""

from __future__ import annotations

import subprocess

import pytest

from support.commands import ROOT

from rapidship.config.matrix import Arch, load_matrix
from rapidship.errors import ConfigError
from rapidship.imagebuild.base import archive_files, engine_ref, in_image, installed_packages, mmdebstrap_command, plan_base
from rapidship.records import BaseInputs, BaseRecord, Workspace

M = load_matrix(ROOT / "variants.yaml")
PLAIN = "harbor.example.internal/dockerhub/library/debian:bookworm-slim"


def test_each_run_makes_its_base_under_its_own_name_never_the_shared_one():
    plan = plan_base(M, "debian12", Arch("amd64"), None)
    a, b = engine_ref(plan, "ci101"), engine_ref(plan, "ci102")
    assert a == PLAIN + "-amd64-ci101" and b == PLAIN + "-amd64-ci102"
    assert engine_ref(plan, "") == PLAIN + "-amd64"  # no run identity: the arch alias, as before
    ws = Workspace("build")
    assert ws.base(plan.ref, "amd64", "ci101") != ws.base(plan.ref, "amd64", "ci102")


def test_the_package_list_is_what_dpkg_says_is_installed():
    """This machine's own dpkg status file, read as a base's is, against dpkg-query's answer."""
    status = open("/var/lib/dpkg/status", encoding="utf-8").read()
    got = installed_packages(status)
    listed = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Package} ${Version}\n"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    want = {name: version for state, name, version in (ln.split(" ", 2) for ln in listed) if state == "installed"}
    assert got == want and len(got) > 50


def test_the_archive_hashes_are_sha256sums_own_lines(tmp_path):
    (tmp_path / "x_InRelease").write_text("Date: Sat, 11 Jul 2026 10:16:37 UTC\n")
    (tmp_path / "x_main_binary-amd64_Packages").write_text("Package: bash\n")
    sums = subprocess.run(["sha256sum", "x_InRelease", "x_main_binary-amd64_Packages"], cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout
    got = archive_files(sums)
    assert list(got) == ["x_InRelease", "x_main_binary-amd64_Packages"] and all(len(v) == 64 for v in got.values())


def test_the_bootstrap_is_reproducible_by_construction():
    plan = plan_base(M, "debian12", Arch("arm64"), "http://mirror.internal/debian", conda_builder=True)
    cmd = mmdebstrap_command(plan, ROOT / "r.tar", ROOT / "facts")
    assert cmd[:4] == ["mmdebstrap", "--mode=root", "--variant=minbase", "--arch=arm64"]
    assert "--include=python3,python3-venv,ca-certificates" in cmd and cmd[-3:] == ["bookworm", str(ROOT / "r.tar"),
                                                                                   "http://mirror.internal/debian"]
    assert any("etc/resolv.conf" in c and "etc/hostname" in c for c in cmd)  # the host's, not the archive's
    assert not in_image("dev/null") and in_image("etc/passwd") and in_image("dev")


def _record(ws: Workspace, run: str, image_id: str) -> BaseRecord:
    inputs = BaseInputs(tool="mmdebstrap 1.3.5", distro="debian", suite="bookworm", mirror="http://deb.debian.org/debian")
    made = BaseRecord(name=PLAIN, arch="amd64", ref=f"{PLAIN}-amd64-{run}", image_id=image_id,
                      source_date_epoch=946684800, seconds=1.0, rootfs_bytes=1, inputs=inputs)
    ws.save(ws.base(PLAIN, "amd64", run), made)
    return made


def test_a_build_takes_the_base_its_run_made_and_refuses_one_moved_under_it(tmp_path, monkeypatch):
    from rapidship.imagebuild import buildkit

    ws = Workspace(tmp_path)
    mine = _record(ws, "ci101", "sha256:" + "1" * 64)
    _record(ws, "ci102", "sha256:" + "2" * 64)  # another run's, on the same engine
    engine = {mine.ref: "sha256:" + "1" * 64, f"{PLAIN}-amd64-ci102": "sha256:" + "2" * 64,
              PLAIN: "sha256:" + "2" * 64}  # the shared name: the later run's
    monkeypatch.setattr(buildkit.ENGINE, "try_inspect", lambda ref: {"Id": engine[ref]} if ref in engine else None)
    monkeypatch.setattr(buildkit, "host_arch", lambda: "amd64")
    v = M.variants["cpu-debian12"]
    assert buildkit.local_base_args(v, Arch.amd64, ws, "ci101") == {"BUILDER_BASE": mine.ref, "RUNTIME_BASE": mine.ref}
    engine[mine.ref] = "sha256:" + "3" * 64  # the name no longer holds the recorded image
    with pytest.raises(ConfigError) as caught:
        buildkit.local_base_args(v, Arch.amd64, ws, "ci101")
    assert "names sha256:111111111111, the engine's " + mine.ref + " is sha256:333333333333" in caught.value.problem
    assert caught.value.fix.endswith("invoke base --os debian12 --arch amd64 --force")


def test_one_reading_of_a_stage_base_for_build_and_the_daemonless_pull(tmp_path, monkeypatch):
    """stage_base is what `build` passes as RUNTIME_BASE and what a pulled candidate is normalised
    over: this run's record's name, never the shared name another run moved; else the plain name or
    the arch alias; None (and `build` refuses) when the engine has neither."""
    from rapidship.imagebuild import buildkit, daemonless

    ws = Workspace(tmp_path)
    mine = _record(ws, "ci101", "sha256:" + "1" * 64)
    engine = {mine.ref: mine.image_id, PLAIN: "sha256:" + "2" * 64}  # the shared name: another run's base
    monkeypatch.setattr(buildkit.ENGINE, "try_inspect", lambda ref: {"Id": engine[ref], "Architecture": "amd64"}
                        if ref in engine else None)
    v = M.variants["cpu-debian12"]
    assert daemonless.stage_base is buildkit.stage_base
    assert buildkit.stage_base(v, "RUNTIME_BASE", Arch.amd64, ws, "ci101") == mine.ref
    assert buildkit.local_base_args(v, Arch.amd64, ws, "ci101")["RUNTIME_BASE"] == mine.ref
    assert buildkit.stage_base(v, "RUNTIME_BASE", Arch.amd64, ws, "ci103") == PLAIN  # no record: the plain name
    del engine[PLAIN]
    engine[PLAIN + "-amd64"] = "sha256:" + "4" * 64
    assert buildkit.stage_base(v, "RUNTIME_BASE", Arch.amd64, ws, "ci103") == PLAIN + "-amd64"
    del engine[PLAIN + "-amd64"]
    assert buildkit.stage_base(v, "RUNTIME_BASE", Arch.amd64, ws, "ci103") is None
    with pytest.raises(ConfigError, match="is not in the engine"):
        buildkit.local_base_args(v, Arch.amd64, ws, "ci103")
