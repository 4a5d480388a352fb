"""Make Debian-family base images locally (mmdebstrap), for sites with no registry to pull from.

One archive state gives one image id, on any machine, in any directory: mmdebstrap with
SOURCE_DATE_EPOCH writes the same tree bit for bit, and the tree is loaded in one layer per Debian
package or group of small ones, and the dpkg state (base_layers.py), each written the way every
normalised layer is (normalise.load_rootfs), its config made here (so the
arch is the plan's: `docker import --platform` is ignored by older engines). The image is named
for this run (engine_ref), and its base record (build/bases/) names the id and the inputs:
mirror, suite, the Release and Packages hashes, every package's version. `invoke build` takes
the base that record names, so another run on the same engine cannot move it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rapidship.engine import ENGINE
from rapidship.errors import ConfigError, RapidshipError
from rapidship.config.matrix import Arch, Matrix
from rapidship.imagebuild.base_layers import BaseLayer, dpkg_lists, plan_base_layers
from rapidship.imagebuild.normalise import LAYER_MTIME, load_rootfs
from rapidship.records import BaseInputs, BaseRecord, Workspace
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
    sources: tuple[str, ...] = ()  # one-line apt sources beside the mirror: a security suite, a site's own repository


def plan_base(m: Matrix, os_key: str, arch: Arch, mirror: str | None, conda_builder: bool = False,
              sources: tuple[str, ...] = ()) -> BasePlan:
    """Pure: which rootfs to make and what to call it."""
    for line in sources:
        if not re.fullmatch(r"deb (\[[^\]\n]*\] )?[a-z+]+://\S+ \S+( \S+)*", line.strip()):
            raise ConfigError("--apt-source", f"{line!r} is not a one-line apt source",
                              "write it as sources.list does, e.g. 'deb http://deb.debian.org/debian-security "
                              "bookworm-security main' or 'deb [trusted=yes] http://127.0.0.1:8000/ ./'")
    variant = next((v for v in m.variants.values() if v.os == os_key), None)
    if variant is None:
        oses = sorted({v.os for v in m.variants.values()})
        raise ConfigError("--os", f"no variant uses os {os_key!r}", f"use one of: {', '.join(oses)}")
    if variant.family != "deb":
        raise ConfigError("--os", f"{os_key} is an RPM-family OS and cannot be bootstrapped with mmdebstrap",
                          "pull its base through the registry prefix in variants.yaml (docs/bases.md)")
    suite = SUITES.get((variant.distro, variant.os_version))
    if suite is None:
        raise ConfigError("--os", f"no Debian suite known for {variant.distro} {variant.os_version}",
                          f"known: {', '.join(f'{d} {v}' for d, v in SUITES)}")
    if conda_builder:
        ref = next((v.bases.builder for v in m.variants.values() if v.flavour.value == "conda"), None)
        if ref is None:
            raise ConfigError("--conda-builder", "no conda variant in the matrix", "drop --conda-builder")
        include = CONDA_BUILDER_PACKAGES
    else:
        ref, include = variant.bases.runtime, ()
    return BasePlan(ref=ref, distro=variant.distro, suite=suite, arch=arch,
                    mirror=mirror or DEFAULT_MIRRORS[variant.distro], include=include,
                    sources=tuple(line.strip() for line in sources))


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


# what mmdebstrap and apt say when they stop: the cause belongs in the message, not only in the log
_CAUSES = ("Failed getting release file", "Failed getting release signature file", "Couldn't download",
           "Unable to fetch", "Invalid Release signature", "Temporary failure resolving", "Could not resolve",
           "No such file or directory", "E: ")


def log_cause(log: Path) -> str:
    """The last line of `log` that says why mmdebstrap (or apt) stopped, or ''."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    found = [ln for ln in lines if any(c in ln for c in _CAUSES)]
    return redact(found[-1])[:300] if found else ""


# labels a made base carries: how it was made, so a second `invoke base` with other flags is not a no-op
MADE_FROM = {"mirror": "io.rapidship.base.mirror", "suite": "io.rapidship.base.suite",
             "include": "io.rapidship.base.include", "sources": "io.rapidship.base.sources"}


def made_from(plan: BasePlan) -> dict[str, str]:
    """Pure: the labels that record how `plan` makes its base (the mirror with any credential hidden)."""
    return {MADE_FROM["mirror"]: redact(plan.mirror), MADE_FROM["suite"]: plan.suite,
            MADE_FROM["include"]: ",".join(plan.include), MADE_FROM["sources"]: " | ".join(map(redact, plan.sources))}


def differences(plan: BasePlan, labels: dict[str, str] | None) -> list[str]:
    """Pure: how the existing base's labels differ from what `plan` would make ([]: the same)."""
    want, have = made_from(plan), labels or {}
    return [f"{key.rsplit('.', 1)[1]} {have.get(key) or '(not recorded)'!r}, the flags say {value!r}"
            for key, value in want.items() if (have.get(key) or "") != value]


def enable_emulation(arch: Arch) -> None:
    """Foreign-arch RUN steps need binfmt_misc + qemu; mount and enable them if they are not yet."""
    if arch.value == host_arch():
        return
    if not shutil.which("arch-test"):  # mmdebstrap runs it to check the emulated arch before it starts
        raise ConfigError("--arch", f"making a {arch.value} base here needs arch-test, qemu-user-static and "
                          "binfmt-support", "apt-get install arch-test qemu-user-static binfmt-support")
    qemu = {"arm64": "qemu-aarch64", "amd64": "qemu-x86_64"}[arch.value]
    binfmt = Path("/proc/sys/fs/binfmt_misc")
    if not (binfmt / "register").exists():
        _run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(binfmt)], "mounting binfmt_misc")
    if not (binfmt / qemu).exists():
        if not shutil.which("update-binfmts"):
            raise ConfigError("--arch", f"building {arch.value} here needs qemu-user-static and binfmt-support",
                              "apt-get install arch-test qemu-user-static binfmt-support")
        _run(["update-binfmts", "--enable", qemu], f"enabling {qemu}")


def host_arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


BASE_EPOCH = LAYER_MTIME  # SOURCE_DATE_EPOCH of every made base: its times and the shadow change day
# what the tree holds that is the host's, not the archive's (mmdebstrap copies both in)
HOST_FILES = ("etc/resolv.conf", "etc/hostname")
MERGED_USR = "/usr/share/mmdebstrap/hooks/merged-usr"


def engine_ref(plan: BasePlan, run: str) -> str:
    """Pure: the engine's name of the base `plan` makes in run `run`: its arch alias and the run's
    identity, so that a second run on one engine makes its own and never moves this one's."""
    return arch_alias(plan.ref, plan.arch) + (f"-{run}" if run else "")


def in_image(path: str) -> bool:
    """Pure: whether a rootfs entry belongs in the image (the engine makes /dev's nodes itself)."""
    return not path.startswith("dev/")


def installed_packages(status: str) -> dict[str, str]:
    """Pure: package -> version of what dpkg's status file says is installed."""
    out = {}
    for stanza in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            out[fields["Package"]] = fields.get("Version", "")
    return dict(sorted(out.items()))


def archive_files(sums: str) -> dict[str, str]:
    """Pure: apt list file -> sha256 from `sha256sum` lines."""
    return dict(sorted((name.strip(), digest) for digest, _, name in (ln.partition("  ") for ln in sums.splitlines())
                       if name.strip()))


def mmdebstrap_command(plan: BasePlan, out_tar: Path, facts: Path) -> list[str]:
    """Pure: the mmdebstrap argv. The customize hook keeps what the archive said (the Release and
    Packages files' hashes, the Release's Date) before the cleanup drops apt's lists."""
    out = shlex.quote(str(facts))
    hook = ('cd "$1/var/lib/apt/lists" && for f in *Release *Packages*; do [ -f "$f" ] && sha256sum "$f"; done '
            f'> {out}/lists.sha256; sed -n "s/^Date: //p" *Release | head -n 1 > {out}/date.txt')
    # merged /usr, as debootstrap makes it: else apt picks usrmerge, which brings the whole of perl
    cmd = ["mmdebstrap", "--mode=root", "--variant=minbase", f"--arch={plan.arch.value}", f"--hook-dir={MERGED_USR}"]
    if plan.include:
        cmd.append("--include=" + ",".join(plan.include))
    if (kept := image_sources(plan)) is not None:
        cmd.append("--customize-hook=printf '%s\\n' " + " ".join(shlex.quote(line) for line in kept)
                   + ' > "$1/etc/apt/sources.list"')
    return cmd + [f"--customize-hook={hook}",
                  "--customize-hook=rm -f " + " ".join(f'"$1/{f}"' for f in HOST_FILES),
                  plan.suite, str(out_tar), plan.mirror, *plan.sources]


def image_sources(plan: BasePlan) -> list[str] | None:
    """Pure: the sources.list the image keeps where a mirror or source carries a credential (mmdebstrap
    writes what it was given, token and all, into the rootfs), else None: the file stays as written."""
    given = [f"deb {plan.mirror} {plan.suite} main", *plan.sources]
    kept = [redact(line) for line in given]
    return kept if kept != given else None


def tool_version() -> str:
    got = subprocess.run(["mmdebstrap", "--version"], capture_output=True, text=True, check=False)
    return got.stdout.strip() or "mmdebstrap"


def bootstrap(plan: BasePlan, workdir: Path, log: Path, run: str = "") -> BaseRecord:
    """mmdebstrap a minbase rootfs with SOURCE_DATE_EPOCH (the same archive state gives the same
    tree, bit for bit) and load it in layers by package (base_layers, normalise.load_rootfs) under this run's
    own name; plus the plain names variants expect when no run identity is set."""
    if not shutil.which("mmdebstrap"):
        raise ConfigError("invoke base", "mmdebstrap is not installed", "apt-get install mmdebstrap (scripts/setup)")
    enable_emulation(plan.arch)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=workdir, prefix="rootfs-") as tmp:
        facts = Path(tmp).resolve()  # the hook runs in the chroot's directory
        rootfs = facts / "rootfs.tar"
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(BASE_EPOCH))
        _run(mmdebstrap_command(plan, rootfs, facts), f"mmdebstrap {plan.suite} {plan.arch.value}", log, env=env)
        with tarfile.open(rootfs) as tar:
            status = tar.extractfile("./var/lib/dpkg/status")
            packages = installed_packages(status.read().decode() if status else "")
        tool = tool_version()
        inputs = BaseInputs(tool=tool, distro=plan.distro, suite=plan.suite, mirror=redact(plan.mirror),
                            include=list(plan.include), sources=[redact(line) for line in plan.sources],
                            archive_date=(facts / "date.txt").read_text().strip(),
                            archive=archive_files((facts / "lists.sha256").read_text()), packages=packages)
        ref = engine_ref(plan, run)
        tags = [ref] + ([plan.ref] if not run and plan.arch.value == host_arch() else [])
        made_by = f"{tool} --variant=minbase --arch={plan.arch.value} {plan.suite} (SOURCE_DATE_EPOCH={BASE_EPOCH})"
        layers: list[BaseLayer] = []

        def by_package(tar: tarfile.TarFile, members: list[tarfile.TarInfo]) -> list[tuple[str, list[tarfile.TarInfo]]]:
            layers.extend(plan_base_layers(members, dpkg_lists(tar, members)))
            return [(layer.name, list(layer.members)) for layer in layers]

        image_id = load_rootfs(rootfs, tags, plan.arch.value, made_from(plan), made_by, BASE_EPOCH, keep=in_image,
                               split=by_package)
        size = rootfs.stat().st_size
    return BaseRecord(name=plan.ref, arch=plan.arch.value, ref=ref, image_id=image_id, source_date_epoch=BASE_EPOCH,
                      seconds=round(time.monotonic() - start, 1), rootfs_bytes=size, inputs=inputs,
                      layers=[layer.to_json() for layer in layers])


def read_base(ws: Workspace, name: str, arch: str, run: str) -> BaseRecord | None:
    """This run's record of the base `name` for `arch`, or None when this run made none."""
    path = ws.base(name, arch, run)
    return ws.load(path, BaseRecord, f"invoke base (for {name} {arch})", "base record") if path.is_file() else None


def package_differences(then: dict[str, str], now: dict[str, str], limit: int = 20) -> list[str]:
    """Pure: how two bases' package lists differ, one line per package."""
    lines = [f"{name} {then.get(name) or '(absent)'} then, {now.get(name) or '(absent)'} now"
             for name in sorted(then.keys() | now.keys()) if then.get(name) != now.get(name)]
    return lines[:limit] + ([f"... and {len(lines) - limit} more"] if len(lines) > limit else [])
