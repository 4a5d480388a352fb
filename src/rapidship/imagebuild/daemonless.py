"""Daemonless builders for CI runners without a Docker engine (rootless BuildKit, kaniko): build,
push a candidate tag, and pull it back into a later job's engine by digest."""

from __future__ import annotations

import base64
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from rapidship.engine import ENGINE
from rapidship.errors import ConfigError, RapidshipError
from rapidship.config.matrix import Arch, Variant, run_id
from rapidship.records import StagedImage, Workspace
from rapidship.imagebuild.normalise import EPOCH_LABEL, normalise
from rapidship.imagebuild.buildkit import (BuildPlan, BuildSecrets, BuiltImage, inspect_image, layer_note, stage_base,
                                          write_secret_files)


# ---- daemonless builders (CI runners without a Docker engine) ----
# Rootless BuildKit (buildctl-daemonless.sh) is the CI default: it honours the templates'
# `RUN --mount=type=secret` and `--mount=type=cache` exactly like the engine's BuildKit.
# kaniko (the maintained osscontainertools fork) parses them, but its own change log says secrets
# handed to it "must be considered exposed", so it is offered only for builds that need none.

BUILDCTL = "buildctl-daemonless.sh"
KANIKO = "/kaniko/executor"



def candidate_ref(variant: Variant, arch: Arch, registry: str, suffix: str) -> str:
    """Pure: where a CI build parks its image until gates and scan have passed."""
    if not registry or not suffix:
        raise ConfigError("RAPIDSHIP_REGISTRY / RAPIDSHIP_CANDIDATE_SUFFIX", "not set",
                          "set both in the CI variables (the generated pipeline does)")
    return f"{registry.rstrip('/')}/{variant.image}:{variant.tag(arch)}-{suffix}"


@dataclass(frozen=True)
class CacheRefs:
    """The BuildKit cache images a build reads and the one it writes (None: it writes none)."""

    imports: tuple[str, ...] = ()
    export: str | None = None


def cache_refs(variant: Variant, arch: Arch, env: Mapping[str, str]) -> CacheRefs:
    """Pure: one cache per variant and arch. A protected ref's build reads and writes the shared
    cache (RAPIDSHIP_CACHE_REPO), which release builds reuse; any other ref's build (a merge request)
    reads it and writes only a cache of its own in RAPIDSHIP_MR_CACHE_REPO, a project its robot may
    write and the protected robot never reads from, or nothing when that is not set."""
    name = f"{variant.image}:cache-{variant.id}-{arch.value}"
    shared_repo, own_repo = env.get("RAPIDSHIP_CACHE_REPO"), env.get("RAPIDSHIP_MR_CACHE_REPO")
    shared = f"{shared_repo.rstrip('/')}/{name}" if shared_repo else None
    if env.get("CI_COMMIT_REF_PROTECTED") == "true":
        return CacheRefs((shared,) if shared else (), shared)
    scope = (f"mr{env['CI_MERGE_REQUEST_IID']}" if env.get("CI_MERGE_REQUEST_IID")
             else f"ref-{env.get('CI_COMMIT_REF_SLUG') or 'local'}")
    own = f"{own_repo.rstrip('/')}/{name}-{scope}"[:255] if own_repo else None
    return CacheRefs(tuple(r for r in (shared, own) if r), own)


def buildctl_command(plan: BuildPlan, secret_files: dict[str, Path], push_ref: str, cache: CacheRefs,
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
    for ref in cache.imports:
        cmd += ["--import-cache", f"type=registry,ref={ref}"]
    if cache.export:  # image-manifest=true: Harbor rejects BuildKit's default cache index media type.
        cmd += ["--export-cache", f"type=registry,ref={cache.export},mode=max,image-manifest=true,oci-mediatypes=true"]
    return cmd + ["--output", f"type=image,name={push_ref},push=true", "--metadata-file", str(metadata_file)]


def kaniko_command(plan: BuildPlan, push_ref: str, cache: CacheRefs, digest_file: Path,
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
    if cache.export and not plan.no_cache:  # kaniko reads and writes one cache repo: the one it may write
        cmd += ["--cache=true", f"--cache-repo={cache.export.rsplit(':', 1)[0]}"]
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


def build_staged(plan: BuildPlan, secrets: BuildSecrets, builder: str, push_ref: str, cache: CacheRefs,
                 log_path: Path, on_line: Callable[[str], None] = lambda _: None) -> StagedImage:
    """Edge: run a daemonless builder that pushes straight to `push_ref`; return what it pushed."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rapidship-secrets-") as tmp:
        env = _docker_config_env(Path(tmp), [push_ref, *cache.imports, *([cache.export] if cache.export else [])])
        out = Path(tmp) / "result"
        if builder == "buildctl":
            cmd = buildctl_command(plan, write_secret_files(secrets, Path(tmp)), push_ref, cache, out)
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
    local = variant.local_ref(arch, run_id())
    with tempfile.TemporaryDirectory(prefix="rapidship-pull-") as tmp:
        env = _docker_config_env(Path(tmp), [repo])
        for args in (["pull", "--quiet", "--platform", f"linux/{arch}", pinned], ["tag", pinned, local]):
            proc = ENGINE.run_cli(args, env=env)
            if proc.returncode != 0:
                raise RapidshipError(pinned, f"docker {args[0]} failed: {proc.stderr.strip()[-300:]}",
                                     "check RAPIDSHIP_REGISTRY_USER/PASSWORD (or docker login) and that the build pushed")
    # the daemonless builders stamp times as BuildKit 0.8 does: normalised here as `build` normalises
    labels = (inspect_image(local).get("Config") or {}).get("Labels") or {}
    if not str(labels.get(EPOCH_LABEL, "")).isdigit():
        raise RapidshipError(pinned, f"the candidate has no {EPOCH_LABEL} label (built by an older rapidship?)",
                             f"rebuild it: invoke ci.build --variant {variant.id} --arch {arch}")
    # over the base `build` takes: this run's own (its record's name), else the one variants.yaml names;
    # that base's layers are kept byte for byte
    base = stage_base(variant, "RUNTIME_BASE", Arch(arch), ws) or variant.bases.runtime
    normal = normalise(local, base, int(labels[EPOCH_LABEL]), note=layer_note(ws.root))
    info = inspect_image(local)
    normalised = {"engine_id": normal.before_id, "base": base, "base_layers_kept": normal.kept_layers,
                  "layers_rewritten": normal.rewritten_layers}
    return BuiltImage(variant=staged.variant, arch=arch, ref=local, name=variant.ref(arch), image_id=info["Id"],
                      size_bytes=info["Size"],
                      zstd_bytes=normal.zstd_bytes, layers=len(info["RootFS"]["Layers"]), seconds=staged.seconds,
                      lock_sha256=(info["Config"].get("Labels") or {}).get("io.rapidship.lock.sha256", ""),
                      base=variant.bases.runtime, log=staged.log, extra={"staged": staged.ref, "digest": staged.digest,
                                                                       "gpu_archs": variant.gpu_archs_label(arch),
                                                                       "source_date_epoch": normal.epoch,
                                                                       "normalised": normalised})
