"""Make Debian-family base images locally (debootstrap), for sites with no registry to pull from.

The image gets exactly the name a variant expects (registry prefix + image from variants.yaml),
so `invoke build` finds it in the engine and never pulls. Arm64 bootstraps run under
qemu-user-static; the rootfs is then imported with BuildKit (`FROM scratch` + `ADD`) because
`docker import --platform` is ignored by older engines and would label an arm64 tree amd64.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rapidship.engine import ENGINE
from rapidship.errors import ConfigError, RapidshipError
from rapidship.config.matrix import Arch, Matrix
from rapidship.redact import redact

DEFAULT_MIRRORS = {"debian": "http://deb.debian.org/debian", "ubuntu": "http://archive.ubuntu.com/ubuntu"}
SUITES = {("debian", "12"): "bookworm", ("debian", "13"): "trixie",
          ("ubuntu", "22.04"): "jammy", ("ubuntu", "24.04"): "noble"}
# Packages the conda builder stand-in needs: python3 with venv (what python:3.11-slim provides).
CONDA_BUILDER_PACKAGES = ("python3", "python3-venv", "ca-certificates")


@dataclass(frozen=True)
class BasePlan:
    ref: str
    distro: str
    suite: str
    arch: Arch
    mirror: str
    include: tuple[str, ...] = ()


@dataclass(frozen=True)
class BaseImage:
    ref: str
    arch: str
    image_id: str
    seconds: float
    rootfs_bytes: int


def plan_base(m: Matrix, os_key: str, arch: Arch, mirror: str | None, conda_builder: bool = False) -> BasePlan:
    """Pure: which rootfs to make and what to call it."""
    variant = next((v for v in m.variants.values() if v.os == os_key), None)
    if variant is None:
        oses = sorted({v.os for v in m.variants.values()})
        raise ConfigError("--os", f"no variant uses os {os_key!r}", f"use one of: {', '.join(oses)}")
    if variant.family != "deb":
        raise ConfigError("--os", f"{os_key} is an RPM-family OS and cannot be bootstrapped with debootstrap",
                          "pull its base through the registry prefix in variants.yaml (docs/bases.md)")
    suite = SUITES.get((variant.distro, variant.os_version))
    if suite is None:
        raise ConfigError("--os", f"no debootstrap suite known for {variant.distro} {variant.os_version}",
                          f"known: {', '.join(f'{d} {v}' for d, v in SUITES)}")
    if conda_builder:
        ref = next((v.bases.builder for v in m.variants.values() if v.flavour.value == "conda"), None)
        if ref is None:
            raise ConfigError("--conda-builder", "no conda variant in the matrix", "drop --conda-builder")
        include = CONDA_BUILDER_PACKAGES
    else:
        ref, include = variant.bases.runtime, ()
    return BasePlan(ref=ref, distro=variant.distro, suite=suite, arch=arch,
                    mirror=mirror or DEFAULT_MIRRORS[variant.distro], include=include)


def arch_alias(ref: str, arch: Arch) -> str:
    """Pure: the local name of one arch's copy of a base. An engine without a multi-platform image
    store holds one image per name, so an arm64 base made on an amd64 host must not take the
    plain name that amd64 builds use."""
    repo, _, digest = ref.partition("@")
    name, _, tag = repo.rpartition(":") if ":" in repo.rsplit("/", 1)[-1] else (repo, "", "")
    return f"{name}:{tag or 'latest'}-{arch.value}" if not digest else f"{name}:local-{arch.value}"


def resolve_local_base(ref: str, arch: Arch) -> str | None:
    """The name under which the engine has `ref` for `arch`: the plain ref, its arch alias, or None."""
    for candidate in (ref, arch_alias(ref, arch)):
        if image_exists(candidate, arch):
            return candidate
    return None


def image_exists(ref: str, arch: Arch | None = None) -> bool:
    found = ENGINE.try_inspect(ref)
    return found is not None and (arch is None or found.get("Architecture") == arch.value)


def _run(cmd: list[str], what: str, log: Path | None = None, **kw) -> None:
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT if log else subprocess.PIPE, check=False, **kw)
    finally:
        if log:
            out.close()
    if proc.returncode != 0:
        cause = log_cause(log) if log else ""
        detail = (f"{cause} (full log: {log})" if cause else f"see {log}") if log else \
            (proc.stderr or b"").decode(errors="replace").strip()[-500:]
        raise RapidshipError(what, f"failed with exit code {proc.returncode}: {detail}", "check the log and retry")


# what debootstrap and apt say when they stop: the cause belongs in the message, not only in the log
_CAUSES = ("Failed getting release file", "Failed getting release signature file", "Couldn't download",
           "Unable to fetch", "Invalid Release signature", "Temporary failure resolving", "Could not resolve",
           "No such file or directory", "E: ")


def log_cause(log: Path) -> str:
    """The last line of `log` that says why debootstrap (or apt) stopped, or ''."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    found = [ln for ln in lines if any(c in ln for c in _CAUSES)]
    return redact(found[-1])[:300] if found else ""


# labels a made base carries: how it was made, so a second `invoke base` with other flags is not a no-op
MADE_FROM = {"mirror": "io.rapidship.base.mirror", "suite": "io.rapidship.base.suite",
             "include": "io.rapidship.base.include"}


def made_from(plan: BasePlan) -> dict[str, str]:
    """Pure: the labels that record how `plan` makes its base (the mirror with any credential hidden)."""
    return {MADE_FROM["mirror"]: redact(plan.mirror), MADE_FROM["suite"]: plan.suite,
            MADE_FROM["include"]: ",".join(plan.include)}


def differences(plan: BasePlan, labels: dict[str, str] | None) -> list[str]:
    """Pure: how the existing base's labels differ from what `plan` would make ([]: the same)."""
    want, have = made_from(plan), labels or {}
    return [f"{key.rsplit('.', 1)[1]} {have.get(key) or '(not recorded)'!r}, the flags say {value!r}"
            for key, value in want.items() if have.get(key) != value]


def enable_emulation(arch: Arch) -> None:
    """Foreign-arch RUN steps need binfmt_misc + qemu; mount and enable them if they are not yet."""
    if arch.value == host_arch():
        return
    qemu = {"arm64": "qemu-aarch64", "amd64": "qemu-x86_64"}[arch.value]
    binfmt = Path("/proc/sys/fs/binfmt_misc")
    if not (binfmt / "register").exists():
        _run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(binfmt)], "mounting binfmt_misc")
    if not (binfmt / qemu).exists():
        if not shutil.which("update-binfmts"):
            raise ConfigError("--arch", f"building {arch.value} here needs qemu-user-static and binfmt-support",
                              "apt-get install qemu-user-static binfmt-support")
        _run(["update-binfmts", "--enable", qemu], f"enabling {qemu}")


def host_arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


def bootstrap(plan: BasePlan, workdir: Path, log: Path) -> BaseImage:
    """debootstrap a minbase rootfs, trim it, and load it into the engine under plan.ref."""
    if not shutil.which("debootstrap"):
        raise ConfigError("invoke base", "debootstrap is not installed", "apt-get install debootstrap")
    enable_emulation(plan.arch)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=workdir, prefix="rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = ["debootstrap", "--variant=minbase", f"--arch={plan.arch.value}"]
        if plan.include:
            cmd.append("--include=" + ",".join(plan.include))
        _run(cmd + [plan.suite, str(rootfs), plan.mirror], f"debootstrap {plan.suite} {plan.arch.value}", log)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "var/log"):
            for entry in (rootfs / junk).glob("*"):
                if entry.is_file():
                    entry.unlink()
        context = Path(tmp) / "context"
        context.mkdir()
        _run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(context / "rootfs.tar"), "."], "tar rootfs", log)
        size = (context / "rootfs.tar").stat().st_size
        labels = "".join(f'LABEL {k}="{v}"\n' for k, v in made_from(plan).items())
        (context / "Dockerfile").write_text("FROM scratch\nADD rootfs.tar /\n" + labels + "CMD [\"bash\"]\n")
        env = dict(os.environ, DOCKER_BUILDKIT="1")
        alias = arch_alias(plan.ref, plan.arch)
        tags = ["-t", alias] + (["-t", plan.ref] if plan.arch.value == host_arch() else [])
        ENGINE.build_logged(["--platform", f"linux/{plan.arch.value}", *tags, str(context)], log, env,
                            f"importing {plan.ref}")
    return BaseImage(ref=alias if plan.arch.value != host_arch() else plan.ref, arch=plan.arch.value,
                     image_id=ENGINE.inspect(alias)["Id"],
                     seconds=round(time.monotonic() - start, 1), rootfs_bytes=size)
