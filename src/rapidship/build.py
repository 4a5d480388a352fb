"""BuildPlan -> BuiltImage with BuildKit through the docker CLI.

Pure core: `plan_build` and `build_command` (records in, argv out). Thin edge: `build` runs the
CLI, streams progress, and measures the result. Secrets (CA bundle, index URLs that may carry
tokens) go in only as BuildKit secrets: files under a 0700 temp dir, never build args.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from rapidship.base import resolve_local_base
from rapidship.engine import ENGINE
from rapidship.errors import ConfigError, RapidshipError
from rapidship.matrix import Arch, Flavour, Variant
from rapidship.records import Workspace
from rapidship.render import Rendered


@dataclass(frozen=True)
class BuildSecrets:
    """Values that must never reach a layer, a build arg or a log."""

    ca_bundle: Path | None = None
    pip_index: str | None = None
    conda_channels: tuple[str, ...] = ()

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
    ref: str
    context: str
    labels: dict[str, str]
    secret_ids: tuple[str, ...]
    base_args: dict[str, str] = field(default_factory=dict)  # BUILDER_BASE/RUNTIME_BASE when not the default
    target: str = "runtime"
    no_cache: bool = False  # rebuild every step (cache mounts such as pip's download cache stay)
    network: str | None = None  # "host": RUN steps reach mirrors on the build machine's loopback


@dataclass(frozen=True)
class BuiltImage:
    variant: str
    arch: str
    ref: str
    image_id: str
    size_bytes: int
    zstd_bytes: int
    layers: int
    seconds: float
    lock_sha256: str
    base: str
    log: str
    cached_steps: int = 0
    total_steps: int = 0
    extra: dict = field(default_factory=dict)


NETWORKS = ("default", "host", "none")


def plan_build(variant: Variant, arch: Arch, rendered: Rendered, secrets: BuildSecrets, revision: str = "",
               no_cache: bool = False, base_args: dict[str, str] | None = None, network: str | None = None) -> BuildPlan:
    """Pure: what to build, under which tag, with which labels and secret ids."""
    if network is not None and network not in NETWORKS:
        raise ConfigError("--network", f"{network!r} is not one of {', '.join(NETWORKS)}",
                          "use --network host to reach a mirror on this machine's 127.0.0.1")
    if arch not in variant.arches:
        offered = ", ".join(a.value for a in variant.arches)
        raise ConfigError("--arch", f"variant {variant.id} is not built for {arch.value}", f"use one of: {offered}")
    ids = ["cacert"] if secrets.ca_bundle else []
    ids += ["pip-index"] if secrets.pip_index else []
    ids += ["conda-channels"] if secrets.conda_channels else []
    labels = {"org.opencontainers.image.created": datetime.now(timezone.utc).replace(microsecond=0).isoformat()}
    if revision:
        labels["org.opencontainers.image.revision"] = revision
    return BuildPlan(variant=variant.id, arch=arch.value, ref=variant.ref(arch), context=rendered.out_dir,
                     labels=labels, secret_ids=tuple(ids), no_cache=no_cache,
                     base_args=base_args or {}, network=network)


def build_command(plan: BuildPlan, cli: str, secret_files: dict[str, Path]) -> list[str]:
    """Pure: the docker build argv. Secret files are referenced by path, their content never appears."""
    cmd = [cli, "build", "--progress=plain", "--platform", f"linux/{plan.arch}", "--target", plan.target,
           "--tag", plan.ref]
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


def local_base_args(variant: Variant, arch: Arch) -> dict[str, str]:
    """Find each stage's base in the engine (plain name or arch alias); fail clearly when absent."""
    args = {}
    for key, ref in (("BUILDER_BASE", variant.bases.builder), ("RUNTIME_BASE", variant.bases.runtime)):
        found = resolve_local_base(ref, arch)
        if found is None:
            conda = key == "BUILDER_BASE" and variant.flavour is Flavour.conda
            raise ConfigError("base image", f"{ref} ({arch.value}) is not in the engine",
                              f"pull it through the registry prefix, or make it: invoke base --os {variant.os}"
                              + (" --conda-builder" if conda else "") + f" --arch {arch.value}")
        if found != ref:
            args[key] = found
    return args


def build(plan: BuildPlan, secrets: BuildSecrets, variant: Variant, log_path: Path,
          on_step: Callable[[str], None] = lambda _: None) -> BuiltImage:
    cli = ENGINE.buildkit_cli()
    env = dict(os.environ, DOCKER_BUILDKIT="1")
    start = time.monotonic()
    steps: set[str] = set()
    cached: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="rapidship-secrets-") as tmp:
        files = _write_secrets(secrets, Path(tmp))
        cmd = build_command(plan, cli, files)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            proc = ENGINE.build_process(cmd, env)
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                line = line.rstrip()
                if m := _STEP.match(line):
                    steps.add(m.group(1))
                    on_step(m.group(2)[:110])
                elif m := _CACHED.match(line):
                    cached.add(m.group(1))
            code = proc.wait()
    if code != 0:
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-15:])
        raise RapidshipError(f"build {plan.ref}", f"docker build failed (exit {code}); last lines:\n{tail}",
                             f"full log: {log_path}")
    seconds = round(time.monotonic() - start, 1)
    info = inspect_image(plan.ref)
    return BuiltImage(variant=plan.variant, arch=plan.arch, ref=plan.ref, image_id=info["Id"], size_bytes=info["Size"],
                      zstd_bytes=zstd_size(plan.ref), layers=len(info["RootFS"]["Layers"]), seconds=seconds,
                      lock_sha256=info["Config"]["Labels"].get("io.rapidship.lock.sha256", ""),
                      base=variant.bases.runtime, log=str(log_path),
                      cached_steps=len(cached & steps), total_steps=len(steps))


def _write_secrets(secrets: BuildSecrets, tmp: Path) -> dict[str, Path]:
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


def zstd_size(ref: str, level: int = 3) -> int:
    """Bytes of `docker save | zstd -T0 -<level>`: what one image costs on a disc."""
    with ENGINE.save(ref) as saved:
        zstd = subprocess.Popen(["zstd", "-T0", f"-{level}", "-q", "-c"], stdin=saved, stdout=subprocess.PIPE)
        assert zstd.stdout is not None
        total = 0
        while chunk := zstd.stdout.read(1 << 20):
            total += len(chunk)
        if zstd.wait() != 0:
            raise RapidshipError(ref, "docker save | zstd failed", "check that zstd is installed and the engine is up")
    return total


def write_record(ws: Workspace, built: BuiltImage) -> Path:
    return ws.save(ws.build(built.variant, built.arch), built)


def read_record(ws: Workspace, variant: str, arch: str) -> BuiltImage:
    return ws.load(ws.build(variant, arch), BuiltImage, f"invoke build --variant {variant} --arch {arch}")


# ---- daemonless builders (CI runners without a Docker engine) ----
# Rootless BuildKit (buildctl-daemonless.sh) is the CI default: it honours the templates'
# `RUN --mount=type=secret` and `--mount=type=cache` exactly like the engine's BuildKit.
# kaniko (the maintained osscontainertools fork) parses them, but its own change log says secrets
# handed to it "must be considered exposed", so it is offered only for builds that need none.

BUILDCTL = "buildctl-daemonless.sh"
KANIKO = "/kaniko/executor"


@dataclass(frozen=True)
class StagedImage:
    """A per-arch image a daemonless builder pushed to a candidate tag for later jobs to pull."""

    variant: str
    arch: str
    ref: str      # registry/repository:tag-<arch>-<suffix>
    digest: str   # sha256:... of what was pushed: later jobs pull exactly this
    builder: str
    seconds: float
    log: str


def candidate_ref(variant: Variant, arch: Arch, registry: str, suffix: str) -> str:
    """Pure: where a CI build parks its image until gates and scan have passed."""
    if not registry or not suffix:
        raise ConfigError("RAPIDSHIP_REGISTRY / RAPIDSHIP_CANDIDATE_SUFFIX", "not set",
                          "set both in the CI variables (the generated pipeline does)")
    return f"{registry.rstrip('/')}/{variant.image}:{variant.tag(arch)}-{suffix}"


def cache_ref(variant: Variant, arch: Arch, cache_repo: str | None) -> str | None:
    """Pure: the BuildKit cache image in Harbor, one per variant and arch (None: no cache)."""
    return f"{cache_repo.rstrip('/')}/{variant.image}:cache-{variant.id}-{arch.value}" if cache_repo else None


def buildctl_command(plan: BuildPlan, secret_files: dict[str, Path], push_ref: str, cache: str | None,
                     metadata_file: Path, program: str = BUILDCTL) -> list[str]:
    """Pure: the buildctl argv. Secrets by path only; cache as a separate OCI image (Harbor-friendly)."""
    cmd = [program, "build", "--progress=plain", "--frontend=dockerfile.v0",
           "--local", f"context={plan.context}", "--local", f"dockerfile={plan.context}",
           "--opt", f"platform=linux/{plan.arch}", "--opt", f"target={plan.target}"]
    if plan.no_cache:
        cmd.append("--no-cache")
    for key, value in sorted(plan.base_args.items()):
        cmd += ["--opt", f"build-arg:{key}={value}"]
    for key, value in sorted(plan.labels.items()):
        cmd += ["--opt", f"label:{key}={value}"]
    if plan.network:  # "host": RUN steps reach mirrors on the runner's loopback (buildkitd must allow it)
        cmd += ["--opt", f"force-network-mode={plan.network}", "--allow", f"network.{plan.network}"]
    for sid in plan.secret_ids:
        cmd += ["--secret", f"id={sid},src={secret_files[sid]}"]
    if cache:
        # image-manifest=true: Harbor rejects BuildKit's default cache index media type.
        cmd += ["--import-cache", f"type=registry,ref={cache}",
                "--export-cache", f"type=registry,ref={cache},mode=max,image-manifest=true,oci-mediatypes=true"]
    return cmd + ["--output", f"type=image,name={push_ref},push=true", "--metadata-file", str(metadata_file)]


def kaniko_command(plan: BuildPlan, push_ref: str, cache: str | None, digest_file: Path,
                   program: str = KANIKO) -> list[str]:
    """Pure: the kaniko argv. Refuses plans with secrets: kaniko would expose them."""
    if plan.secret_ids:
        raise ConfigError("RAPIDSHIP_BUILDER=kaniko", f"this build needs BuildKit secrets ({', '.join(plan.secret_ids)}); "
                          "kaniko does not keep secrets out of reach of the build",
                          "use the default builder (buildctl), or build without a CA bundle or tokenised mirror")
    cmd = [program, f"--context=dir://{plan.context}", f"--dockerfile={plan.context}/Dockerfile",
           f"--target={plan.target}", f"--custom-platform=linux/{plan.arch}", f"--destination={push_ref}",
           f"--digest-file={digest_file}"]
    if plan.network:
        raise ConfigError("--network", "kaniko runs RUN steps in its own container's network", "use the buildctl builder")
    for key, value in sorted(plan.base_args.items()):
        cmd.append(f"--build-arg={key}={value}")
    for key, value in sorted(plan.labels.items()):
        cmd.append(f"--label={key}={value}")
    if cache and not plan.no_cache:
        cmd += ["--cache=true", f"--cache-repo={cache.rsplit(':', 1)[0]}"]
    return cmd


def registry_auth(refs: list[str], user: str | None, password: str | None) -> dict | None:
    """Pure: a docker config.json granting `user` on the registries of `refs` (None: no credentials,
    the job's own docker config applies). buildctl, kaniko and the docker CLI all read this file."""
    if not user or not password:
        return None
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"auths": {ref.split("/", 1)[0]: {"auth": token} for ref in refs if "/" in ref}}


def _docker_config_env(tmp: Path, refs: list[str]) -> dict[str, str]:
    """Env for a registry client: DOCKER_CONFIG in a 0700 temp dir when RAPIDSHIP_REGISTRY_USER/PASSWORD are set."""
    config = registry_auth(refs, os.environ.get("RAPIDSHIP_REGISTRY_USER"), os.environ.get("RAPIDSHIP_REGISTRY_PASSWORD"))
    env = dict(os.environ)
    if config:
        home = tmp / "docker-config"
        home.mkdir(mode=0o700)
        (home / "config.json").write_text(json.dumps(config))
        (home / "config.json").chmod(0o600)
        env["DOCKER_CONFIG"] = str(home)
    return env


def build_staged(plan: BuildPlan, secrets: BuildSecrets, builder: str, push_ref: str, cache: str | None,
                 log_path: Path, on_line: Callable[[str], None] = lambda _: None) -> StagedImage:
    """Edge: run a daemonless builder that pushes straight to `push_ref`; return what it pushed."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rapidship-secrets-") as tmp:
        env = _docker_config_env(Path(tmp), [push_ref, *([cache] if cache else [])])
        out = Path(tmp) / "result"
        if builder == "buildctl":
            cmd = buildctl_command(plan, _write_secrets(secrets, Path(tmp)), push_ref, cache, out)
        elif builder == "kaniko":
            cmd = kaniko_command(plan, push_ref, cache, out)
        else:
            raise ConfigError("RAPIDSHIP_BUILDER", f"{builder!r} is not buildctl or kaniko",
                              "set RAPIDSHIP_BUILDER=buildctl (default) or kaniko")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            try:
                proc = ENGINE.build_process(cmd, env)
            except FileNotFoundError:
                raise RapidshipError(f"build {plan.ref}", f"{cmd[0]} is not installed in this job's image",
                                     "run the build job in the BuildKit (or kaniko) CI image: see docs/ci.md") from None
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                on_line(line.rstrip()[:110])
            code = proc.wait()
        if code != 0:
            raise RapidshipError(f"build {plan.ref}", f"{cmd[0]} failed (exit {code})", f"full log: {log_path}")
        text = out.read_text().strip() if out.is_file() else ""
        digest = json.loads(text).get("containerimage.digest", "") if text.startswith("{") else text
    if not digest.startswith("sha256:"):
        raise RapidshipError(f"build {plan.ref}", "the builder reported no pushed digest", f"full log: {log_path}")
    return StagedImage(variant=plan.variant, arch=plan.arch, ref=push_ref, digest=digest, builder=builder,
                       seconds=round(time.monotonic() - start, 1), log=str(log_path))


def write_staged(ws: Workspace, staged: StagedImage) -> Path:
    return ws.save(ws.staged(staged.variant, staged.arch), staged)


def pull_staged(ws: Workspace, arch: str, variant: Variant) -> BuiltImage:
    """Edge: pull a staged candidate by digest into this job's engine under the local ref, and
    measure it exactly as `build` does, so gates, scan, push and smoke read the same record."""
    staged = ws.load(ws.staged(variant.id, arch), StagedImage,
                     f"invoke ci.build --variant {variant.id} --arch {arch} (the build job: check the job's needs)",
                     "staged build record")
    repo = staged.ref.rsplit(":", 1)[0] if ":" in staged.ref.rsplit("/", 1)[-1] else staged.ref
    pinned = f"{repo}@{staged.digest}"
    local = variant.ref(arch)
    with tempfile.TemporaryDirectory(prefix="rapidship-pull-") as tmp:
        env = _docker_config_env(Path(tmp), [repo])
        for args in (["pull", "--quiet", "--platform", f"linux/{arch}", pinned], ["tag", pinned, local]):
            proc = ENGINE.run_cli(args, env=env)
            if proc.returncode != 0:
                raise RapidshipError(pinned, f"docker {args[0]} failed: {proc.stderr.strip()[-300:]}",
                                     "check RAPIDSHIP_REGISTRY_USER/PASSWORD (or docker login) and that the build pushed")
    info = inspect_image(local)
    return BuiltImage(variant=staged.variant, arch=arch, ref=local, image_id=info["Id"], size_bytes=info["Size"],
                      zstd_bytes=zstd_size(local), layers=len(info["RootFS"]["Layers"]), seconds=staged.seconds,
                      lock_sha256=(info["Config"].get("Labels") or {}).get("io.rapidship.lock.sha256", ""),
                      base=variant.bases.runtime, log=staged.log, extra={"staged": staged.ref, "digest": staged.digest})
