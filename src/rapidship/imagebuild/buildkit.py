"""BuildPlan -> BuiltImage with BuildKit through the docker CLI.

Pure core: `plan_build` and `build_command` (records in, argv out). Thin edge: `build` runs the
CLI, streams progress, and measures the result. Secrets (CA bundle, index URLs that may carry
tokens) go in only as BuildKit secrets: files under a 0700 temp dir, never build args.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rapidship import layerfacts
from rapidship.imagebuild.base import host_arch, read_base, resolve_local_base
from rapidship.imagebuild.normalise import EPOCH_LABEL, Note, created_label, normalise
from rapidship.needles import fingerprint, needles_of, secret_values
from rapidship.engine import ENGINE
from rapidship.errors import ConfigError, RapidshipError
from rapidship.config.matrix import Arch, Flavour, Variant, run_id
from rapidship.records import BuiltImage, Workspace
from rapidship.redact import scrub
from rapidship.render.dockerfile import Rendered


@dataclass(frozen=True)
class BuildSecrets:
    """Values that must never reach a layer, a build arg or a log."""

    ca_bundle: Path | None = None
    pip_index: str | None = None
    conda_channels: tuple[str, ...] = ()

    def values(self) -> list[str]:
        """The secret strings (mirror URLs that may carry tokens), to hide from what a build saves."""
        return [v for v in (self.pip_index, *self.conda_channels) if v]

    @classmethod
    def from_flags(cls, ca_bundle: str | None, pip_index: str | None, conda_channels: list[str] | None) -> "BuildSecrets":
        env = os.environ
        ca = ca_bundle or env.get("RAPIDSHIP_CA_BUNDLE") or env.get("SSL_CERT_FILE")
        if ca_bundle and not Path(ca_bundle).is_file():
            raise ConfigError("--ca-bundle", f"{ca_bundle} is not a file", "pass the PEM bundle your proxy needs")
        channels = conda_channels or [c for c in env.get("RAPIDSHIP_CONDA_CHANNELS", "").split() if c]
        return cls(ca_bundle=Path(ca) if ca and Path(ca).is_file() else None,
                   pip_index=pip_index or env.get("RAPIDSHIP_PIP_INDEX_URL") or None,
                   conda_channels=tuple(channels))


@dataclass(frozen=True)
class BuildPlan:
    variant: str
    arch: str
    ref: str   # the engine's name: `name` and the run's identity
    name: str  # the release name (variant ref), what signatures and discs carry
    context: str
    labels: dict[str, str]
    secret_ids: tuple[str, ...]
    base_args: dict[str, str] = field(default_factory=dict)  # BUILDER_BASE/RUNTIME_BASE when not the default
    target: str = "runtime"
    no_cache: bool = False  # rebuild every step (cache mounts such as pip's download cache stay)
    network: str | None = None  # "host": RUN steps reach mirrors on the build machine's loopback
    epoch: int = 0  # SOURCE_DATE_EPOCH: the image's created time and every layer's latest mtime
    revision: str = ""  # the source commit (full), recorded for `invoke reproduce`



NETWORKS = ("default", "host", "none")


def check_network(network: str | None) -> None:
    """--network names one of NETWORKS (or is left out): one error naming the flag otherwise."""
    if network is not None and network not in NETWORKS:
        raise ConfigError("--network", f"{network!r} is not one of {', '.join(NETWORKS)}",
                          "use --network host to reach a mirror on this machine's 127.0.0.1")


def plan_build(variant: Variant, arch: Arch, rendered: Rendered, secrets: BuildSecrets, revision: str = "",
               no_cache: bool = False, base_args: dict[str, str] | None = None, network: str | None = None,
               *, epoch: int) -> BuildPlan:
    """Pure: what to build, under which tag, with which labels and secret ids. `epoch` (the source's
    SOURCE_DATE_EPOCH, normalise.source_date_epoch) is the image's creation time: two builds of one
    commit are one release, with one image id."""
    check_network(network)
    if arch not in variant.arches:
        offered = ", ".join(a.value for a in variant.arches)
        raise ConfigError("--arch", f"variant {variant.id} is not built for {arch.value}", f"use one of: {offered}")
    ids = ["cacert"] if secrets.ca_bundle else []
    ids += ["pip-index"] if secrets.pip_index else []
    ids += ["conda-channels"] if secrets.conda_channels else []
    labels = {"org.opencontainers.image.created": created_label(epoch), EPOCH_LABEL: str(epoch)}
    if revision:
        labels["org.opencontainers.image.revision"] = revision
    return BuildPlan(variant=variant.id, arch=arch.value, ref=variant.local_ref(arch, run_id()), name=variant.ref(arch),
                     context=rendered.out_dir,
                     labels=labels, secret_ids=tuple(ids), no_cache=no_cache,
                     base_args=base_args or {}, network=network, epoch=epoch, revision=revision)


def build_command(plan: BuildPlan, cli: str, secret_files: dict[str, Path]) -> list[str]:
    """Pure: the docker build argv. Secret files are referenced by path, their content never appears."""
    cmd = [cli, "build", "--progress=plain", "--platform", f"linux/{plan.arch}",
           *(["--target", plan.target] if plan.target else []), "--tag", plan.ref]
    if plan.no_cache:
        cmd.append("--no-cache")
    for key, value in sorted(plan.base_args.items()):
        cmd += ["--build-arg", f"{key}={value}"]
    for key, value in sorted(plan.labels.items()):
        cmd += ["--label", f"{key}={value}"]
    for sid in plan.secret_ids:
        cmd += ["--secret", f"id={sid},src={secret_files[sid]}"]
    if plan.network:
        cmd += ["--network", plan.network]
    return cmd + [plan.context]


_STEP = re.compile(r"^#(\d+) (\[[^\]]+\] .*)$")
_CACHED = re.compile(r"^#(\d+) CACHED$")


def stage_arches(variant: Variant, arch: Arch) -> dict[str, Arch]:
    """Pure: which arch each stage's base must be. The pip builder runs on the build machine
    (FROM --platform=$BUILDPLATFORM) and cross-installs the target's wheels; the rest is the target."""
    builder = Arch(host_arch()) if variant.flavour is Flavour.pip else arch
    return {"BUILDER_BASE": builder, "RUNTIME_BASE": arch}


def stage_bases(variant: Variant, arch: Arch) -> dict[str, tuple[str, Arch]]:
    """Pure: each stage's base as variants.yaml names it, and the arch it must be."""
    arches = stage_arches(variant, arch)
    return {"BUILDER_BASE": (variant.bases.builder, arches["BUILDER_BASE"]),
            "RUNTIME_BASE": (variant.bases.runtime, arches["RUNTIME_BASE"])}


def local_base_args(variant: Variant, arch: Arch, ws: Workspace | None = None, run: str | None = None) -> dict[str, str]:
    """Each stage's base (stage_base) where it is not the name variants.yaml gives; fail clearly when absent."""
    args = {}
    for key, (ref, base_arch) in stage_bases(variant, arch).items():
        found = stage_base(variant, key, arch, ws, run)
        if found is None:
            raise ConfigError("base image", f"{ref} ({base_arch.value}) is not in the engine",
                              f"pull it through the registry prefix, or make it: invoke base --os {variant.os}"
                              + base_flag(variant, key) + f" --arch {base_arch.value}")
        if found != ref:
            args[key] = found
    return args


def stage_base(variant: Variant, key: str, arch: Arch, ws: Workspace | None = None, run: str | None = None) -> str | None:
    """The engine's name of one stage's base: the one this run's base record names (checked to still
    be that image id), else the name variants.yaml gives (a pulled base) or its arch alias; None when
    the engine has neither. What a build builds on and what its image is normalised over."""
    ws, run = ws or Workspace(), run_id() if run is None else run
    ref, base_arch = stage_bases(variant, arch)[key]
    made = read_base(ws, ref, base_arch.value, run)
    if made is None:
        return resolve_local_base(ref, base_arch)
    now = (ENGINE.try_inspect(made.ref) or {}).get("Id", "")
    if now != made.image_id:
        raise ConfigError("base image", f"{ws.base(ref, base_arch.value, run)} names {made.image_id[:19]}, the "
                          f"engine's {made.ref} is {now[:19] or 'absent'}", "make it again: invoke base --os "
                          f"{variant.os}{base_flag(variant, key)} --arch {base_arch.value} --force")
    return made.ref


def base_flag(variant: Variant, key: str) -> str:
    return " --conda-builder" if key == "BUILDER_BASE" and variant.flavour is Flavour.conda else ""


# BuildKit of engine 20.10 (v0.8) can fail a step when many steps in flight share one source
# (moby/buildkit#1822): the pip env's link steps do (each mounts its plan from one index stage; a
# cold build starts them all at once). Another run does only the failed ones, fewer at once.
BUILDKIT_FLAKE = "flightcontrol: exceeded retry timeout"
BUILDKIT_RUNS = 3


def build(plan: BuildPlan, secrets: BuildSecrets, variant: Variant, log_path: Path,
          on_step: Callable[[str], None] = lambda _: None) -> BuiltImage:
    cli = ENGINE.buildkit_cli()
    env = dict(os.environ, DOCKER_BUILDKIT="1")
    start = time.monotonic()
    steps: set[str] = set()
    cached: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="rapidship-secrets-") as tmp:
        files = write_secret_files(secrets, Path(tmp))
        cmd = build_command(plan, cli, files)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        hidden = secrets.values()
        with open(log_path, "w") as log:
            for attempt in range(BUILDKIT_RUNS):
                steps.clear()
                cached.clear()
                log.write("$ " + " ".join(cmd) + "\n")
                log.flush()
                proc = ENGINE.build_process(cmd, env)
                assert proc.stdout is not None
                flake = False
                for line in proc.stdout:  # pip and conda print index URLs: tokens never reach the log
                    line = scrub(line, hidden) if hidden else line
                    log.write(line)
                    log.flush()  # the heartbeat outside a terminal shows the log's last line
                    flake = flake or BUILDKIT_FLAKE in line
                    line = line.rstrip()
                    if m := _STEP.match(line):
                        steps.add(m.group(1))
                        on_step(m.group(2)[:110])
                    elif m := _CACHED.match(line):
                        cached.add(m.group(1))
                code = proc.wait()
                if code == 0 or not flake or attempt == BUILDKIT_RUNS - 1:
                    break
                # the engine's own race, not the build's: the steps that finished are cached, so a
                # second run does only the rest, with fewer steps in flight at once
                log.write(f"rapidship: BuildKit failed with {BUILDKIT_FLAKE!r} (moby/buildkit#1822); running the "
                          "build once more\n")
                on_step("BuildKit's flightcontrol timeout: running the build once more")
    if code != 0:
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-15:])
        raise RapidshipError(f"build {plan.ref}", f"docker build failed (exit {code}); last lines:\n{tail}",
                             failed_build_fix(tail, plan, log_path))
    seconds = round(time.monotonic() - start, 1)
    runtime_base = plan.base_args.get("RUNTIME_BASE", variant.bases.runtime)
    normal_start = time.monotonic()
    on_step(f"normalising {plan.ref} to SOURCE_DATE_EPOCH={plan.epoch}")
    normal = normalise(plan.ref, runtime_base, plan.epoch, note=layer_note(Workspace().root, secrets))
    info = inspect_image(plan.ref)
    return BuiltImage(variant=plan.variant, arch=plan.arch, ref=plan.ref, name=plan.name, image_id=info["Id"],
                      size_bytes=info["Size"],
                      zstd_bytes=normal.zstd_bytes, layers=len(info["RootFS"]["Layers"]), seconds=seconds,
                      lock_sha256=info["Config"]["Labels"].get("io.rapidship.lock.sha256", ""),
                      base=variant.bases.runtime, log=str(log_path),
                      cached_steps=len(cached & steps), total_steps=len(steps),
                      extra={"gpu_archs": variant.gpu_archs_label(plan.arch), "bases": base_digests(variant, plan),
                             "build_args": dict(plan.base_args), "secret_ids": list(plan.secret_ids),
                             "target": plan.target, "source_date_epoch": plan.epoch, "revision": plan.revision,
                             "normalised": {"engine_id": normal.before_id, "base_layers_kept": normal.kept_layers,
                                            "layers_rewritten": normal.rewritten_layers,
                                            "layers_reused": normal.reused_layers,
                                            "seconds": round(time.monotonic() - normal_start, 1)}})


def layer_note(root: Path, secrets: BuildSecrets | None = None) -> Note:
    """Where the normaliser keeps each layer's facts, with the build's secrets as the needles its
    files are searched for (the secrets gate reads the hits back when it looks for the same)."""
    found, _ = needles_of(secrets.ca_bundle, secret_values(secrets.pip_index, secrets.conda_channels)) \
        if secrets is not None else ([], [])
    return Note(root, tuple(found), fingerprint(found, layerfacts.key_path(root)))


def failed_build_fix(tail: str, plan: BuildPlan, log_path: Path) -> str:
    """What to do about a failed build: the engine's own words where they name a cause the user can
    fix here (an engine started without its default bridge gives RUN steps no network), else the log."""
    if "network bridge not found" in tail and plan.network in (None, "default"):
        return (f"this engine has no default bridge network (dockerd --bridge none): pass --network host (RUN steps "
                f"share this machine's network) or --network none; full log: {log_path}")
    return f"full log: {log_path}"


def base_digests(variant: Variant, plan: BuildPlan) -> dict[str, dict]:
    """Each stage's base as the engine had it when this build ran: ref, image id, repo digests
    (the provenance lists them; a base rebuilt later under the same name shows as another id), and
    for a base this run made, its inputs (mirror, suite, archive, packages: what reproduce compares)."""
    out = {}
    for key, (ref, base_arch) in stage_bases(variant, Arch(plan.arch)).items():
        used = plan.base_args.get(key, ref)
        info = ENGINE.try_inspect(used) or {}
        out[key] = {"ref": used, "id": info.get("Id", ""), "repo_digests": list(info.get("RepoDigests") or [])}
        made = read_base(Workspace(), ref, base_arch.value, run_id())
        if made is not None and made.ref == used and made.image_id == out[key]["id"]:
            out[key]["inputs"] = made.inputs.model_dump(mode="json")
    return out


def write_secret_files(secrets: BuildSecrets, tmp: Path) -> dict[str, Path]:
    tmp.chmod(0o700)
    files: dict[str, Path] = {}
    if secrets.ca_bundle:
        files["cacert"] = secrets.ca_bundle
    if secrets.pip_index:
        files["pip-index"] = tmp / "pip-index"
        files["pip-index"].write_text(secrets.pip_index)
    if secrets.conda_channels:
        files["conda-channels"] = tmp / "conda-channels"
        files["conda-channels"].write_text("\n".join(secrets.conda_channels) + "\n")
    for path in files.values():
        if path.parent == tmp:
            path.chmod(0o600)
    return files


def inspect_image(ref: str) -> dict:
    return ENGINE.inspect(ref)


def write_record(ws: Workspace, built: BuiltImage) -> Path:
    return ws.save(ws.build(built.variant, built.arch), built)


def read_record(ws: Workspace, variant: str, arch: str) -> BuiltImage:
    return ws.load(ws.build(variant, arch), BuiltImage, f"invoke build --variant {variant} --arch {arch}")


def built_ref(ws: Workspace, variant: Variant, arch: str) -> str:
    """The engine's name of a variant's image: its build record's, else the one invoke build gives now."""
    return read_record(ws, variant.id, arch).ref if ws.build(variant.id, arch).is_file() else \
        variant.local_ref(arch, run_id())
