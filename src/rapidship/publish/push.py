"""Push a variant to the registry (per-arch tags, then one manifest list) and promote it.

Order of `push` (fail closed at every step; nothing reaches the registry before all checks pass):
  1. every arch of the variant exists in the engine with the right architecture;
  2. every arch's gate record build/<variant>/gates-<arch>.json and trivy decision
     build/<variant>/scan-<arch>/decision.json say "passed": true
     (`--skip-gates` bypasses this loudly and the record says so);
  3. each arch is copied with skopeo to <tag>-<arch> (blobs, manifest; skopeo retries itself and
     we retry the whole copy on transient faults; re-copying skips blobs already there);
  4. the per-arch manifests are read back (digest, size, platform from their config blob);
  5. ONE PUT of the index under <tag>. A single request cannot leave half an index: either the
     registry stored it (and the digest is checked) or the tag does not exist.
`promote` copies the pushed index from staging to release by digest: blobs are mounted across
repositories (or copied when the registry declines), manifests are put byte for byte, so the
release digest equals the staged one. Nothing is rebuilt.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from rapidship import oci_json
from rapidship.engine import ENGINE
from rapidship.errors import ConfigError, GateFailure, RapidshipError
from rapidship.config.matrix import Variant
from rapidship.publish.oci import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, Credentials, Registry, split_repository
from rapidship.records import ArchImage, PromoteRecord, PushRecord, Workspace, gated_problems
from rapidship.publish.retrying import RetryPolicy, backoff, copy_deadline, nothing_listens, refused_on_loopback
from rapidship.sign import release
from rapidship.sign.release import Release

# skopeo's words for an engine it cannot reach (the image is read from it)
_NO_ENGINE = ("Cannot connect to the Docker daemon", "docker.sock", "Is the docker daemon running")
# skopeo output that no retry can fix.
_PERMANENT = ("unauthorized", "denied", "authentication required", "invalid username/password",
              "manifest invalid", "no such image", "reference does not exist", "x509", "certificate",
              "no such host", "server gave http response to https client")


@dataclass
class RetryCounter:
    count: int = 0
    log: Callable[[str], None] = lambda _: None
    faults: list[str] = field(default_factory=list)

    def __call__(self, attempt: int, fault: str, delay: float) -> None:
        self.count += 1
        self.faults.append(fault)
        self.log(f"retry {attempt} in {delay:.1f}s: {fault}")


# ---- pure parts ----

def check_gates(ws: Workspace, variant: Variant, image_ids: dict[str, str]) -> list[str]:
    """Every arch (arch -> the image id about to be published) needs its build record, image gates
    (gates-<arch>.json), trivy decision (scan-<arch>/decision.json) and content manifest, each a
    whole, valid record of exactly that image, gates and scan passed. Returns the problems (empty =
    go); a missing, corrupt or STALE record is a problem, never a pass."""
    return [p for arch in variant.arches for p in gated_problems(ws, variant.id, arch.value, image_ids[arch.value])]


def gated_records(ws: Workspace, record: PushRecord) -> list[str]:
    """What promote, Harbor's gate and export ask of a push record: every pushed arch's records name
    the image that was pushed (its config digest) and passed."""
    problems = ["push.json: the push skipped its gates (--skip-gates)"] if record.gates_skipped else []
    problems += [f"{arch}: push.json records no image id (pushed by an older rapidship): push again"
                 for arch, a in sorted(record.arches.items()) if not a.image_id]
    return problems or [p for arch, a in sorted(record.arches.items())
                        for p in gated_problems(ws, record.variant, arch, a.image_id)]


def make_index(children: list[ArchImage]) -> tuple[bytes, str]:
    """Pure: the manifest list (Docker children) or OCI index (OCI children) over `children`."""
    kinds = {c.media_type for c in children}
    if len(kinds) != 1:
        raise RapidshipError("manifest list", f"per-arch manifests mix media types {sorted(kinds)}",
                             "push every arch with the same tool and format")
    media = DOCKER_LIST if kinds == {DOCKER_MANIFEST} else OCI_INDEX
    doc = {"schemaVersion": 2, "mediaType": media,
           "manifests": [{"mediaType": c.media_type, "digest": c.digest, "size": c.size, "platform": c.platform}
                         for c in children]}
    return json.dumps(doc, indent=3).encode(), media


def platform_of(config: dict) -> dict:
    out = {"architecture": config.get("architecture", ""), "os": config.get("os", "")}
    if config.get("variant"):
        out["variant"] = config["variant"]
    return out


# ---- the edge ----

def _cert_dir(tmp: Path, ca_bundle: str | None) -> list[str]:
    if not ca_bundle:
        return []
    d = tmp / "certs"
    d.mkdir()
    shutil.copy(ca_bundle, d / "ca.crt")
    return ["--dest-cert-dir", str(d)]


def _auth_file(tmp: Path, host: str, creds: Credentials | None) -> list[str]:
    if creds is None:
        return []
    path = tmp / "auth.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        token = base64.b64encode(f"{creds.user}:{creds.password}".encode()).decode()
        json.dump({"auths": {host: {"auth": token}}}, out)
    return ["--dest-authfile", str(path)]


def daemon_host_flags() -> list[str]:
    """skopeo's docker-daemon transport reads /var/run/docker.sock unless told: the engine that
    built the image is the one DOCKER_HOST names, so push reads that one too."""
    host = os.environ.get("DOCKER_HOST")
    return ["--src-daemon-host", host] if host else []


def skopeo_push(ref: str, dest: str, host: str, creds: Credentials | None, ca_bundle: str | None,
                policy: RetryPolicy, retries: RetryCounter, size: int = 0) -> str:
    """Copy one engine image (`size` bytes) to the registry, each attempt within copy_deadline;
    returns its manifest digest."""
    if shutil.which("skopeo") is None:
        raise ConfigError("skopeo", "not installed", "apt-get install skopeo")
    start, deadline = time.monotonic(), copy_deadline(policy, size)
    with tempfile.TemporaryDirectory(prefix="rapidship-push-") as tmp_name:
        tmp = Path(tmp_name)
        tmp.chmod(0o700)
        digest_file = tmp / "digest"
        cmd = ["skopeo", "copy", "--quiet", "--retry-times", str(max(0, policy.attempts // 3)), "--dest-tls-verify=true",
               *_auth_file(tmp, host, creds), *_cert_dir(tmp, ca_bundle), *daemon_host_flags(),
               "--digestfile", str(digest_file), f"docker-daemon:{ref}", f"docker://{dest}"]
        for attempt in range(1, policy.attempts + 1):
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=deadline)
            except subprocess.TimeoutExpired:  # run() has killed it
                err = (f"no answer from {host} within {deadline:.0f} s (the copy of {size / 1e6:.1f} MB; "
                       f"RAPIDSHIP_RETRY_TIMEOUT={policy.timeout:g} s + 1 s per MB)")
            else:
                if proc.returncode == 0:
                    return digest_file.read_text().strip()
                err = _skopeo_error(proc.stderr) or f"exit {proc.returncode}"
            if any(m in err for m in _NO_ENGINE):
                raise RapidshipError(f"push {dest}", f"skopeo cannot read the image from the engine: {err}",
                                     "push reads the engine DOCKER_HOST names, as build did; check that it runs "
                                     "and that DOCKER_HOST is the same as for the build")
            if refused_on_loopback(err, host.rsplit(":", 1)[0]):
                raise nothing_listens(f"push {dest}", host)
            if any(p in err.lower() for p in _PERMANENT) or attempt == policy.attempts:
                hint = ("the registry or the network is failing persistently: check it, then run again"
                        if attempt == policy.attempts else "check the credentials, the CA and the image")
                raise RapidshipError(f"push {dest}", f"skopeo copy failed after {attempt} attempt(s) in "
                                     f"{time.monotonic() - start:.0f} s: {err}", hint)
            delay = backoff(policy, attempt)
            retries(attempt, f"skopeo copy: {err}", delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _skopeo_error(stderr: str) -> str:
    """The message of skopeo's last log line (level=fatal msg="..."), without the log framing."""
    lines = stderr.strip().splitlines()
    if not lines:
        return ""
    m = re.search(r'msg="((?:[^"\\]|\\.)*)"', lines[-1])
    return m.group(1).replace('\\"', '"') if m else lines[-1]


def arch_image(reg: Registry, repo: str, arch: str, tag: str, digest: str) -> ArchImage:
    data, desc = reg.get_manifest(repo, digest)
    config_digest = reg.parse_manifest(data, f"{repo}@{digest}")["config"]["digest"]
    config = json.loads(reg.get_blob(repo, config_digest))
    return ArchImage(arch=arch, tag=tag, digest=desc.digest, size=desc.size, media_type=desc.media_type,
                     platform=platform_of(config), image_id=config_digest)


def engine_ids(ws: Workspace, variant: Variant) -> dict[str, str]:
    """arch -> the id of the image that arch's name (its build record's, else the one invoke build
    gives) names in the engine now; one error naming every arch that is missing or of another
    architecture."""
    from rapidship.imagebuild.buildkit import built_ref

    names = {a.value: built_ref(ws, variant, a.value) for a in variant.arches}
    found = {a: ENGINE.try_inspect(name) for a, name in names.items()}
    missing = [a for a, info in found.items() if info is None or info.get("Architecture") != a]
    if missing:
        present = [a for a in names if a not in missing]
        raise RapidshipError(f"push {variant.id}", f"no {', '.join(missing)} image in the engine "
                             f"({', '.join(names[a] for a in missing)}); a manifest list needs every arch it names",
                             (f"push only what is built: invoke push --variant {variant.id} "
                              + " ".join(f"--arch {a}" for a in present) + "; or " if present else "")
                             + f"build it: invoke build --variant {variant.id} --arch {missing[0]}")
    return {a: info["Id"] for a, info in found.items() if info is not None}


def push(variant: Variant, target: str, ws: Workspace, creds: Credentials | None, ca_bundle: str | None = None,
         skip_gates: bool = False, policy: RetryPolicy = RetryPolicy(),
         log: Callable[[str], None] = lambda _: None) -> PushRecord:
    start = time.monotonic()
    host, project = split_repository(target)
    repo = f"{project}/{variant.image}"
    ids = engine_ids(ws, variant)
    problems = check_gates(ws, variant, ids)
    if problems and not skip_gates:
        raise GateFailure(f"push {variant.id}", "gates did not pass for every arch:\n  " + "\n  ".join(problems),
                          f"run the gates (invoke gates --variant {variant.id} --arch ARCH for each arch named) and fix what "
                          "fails; nothing was pushed")
    if skip_gates:
        log("[bold red]WARNING: --skip-gates: pushing WITHOUT gate results"
            + (f" ({'; '.join(problems)})" if problems else "") + ". The record says so; promote will refuse it.[/]")
    retries = RetryCounter(log=log)
    reg = Registry(host, creds, ca_bundle, policy, on_retry=retries)
    children = []
    for arch in variant.arches:
        tag = variant.tag(arch)
        log(f"pushing {variant.id} {arch.value} ({ids[arch.value][:19]}) -> {host}/{repo}:{tag}")
        # by id, not by tag: the image whose records were just checked, even if the tag moves meanwhile
        size = int((ENGINE.try_inspect(ids[arch.value]) or {}).get("Size", 0))
        digest = skopeo_push(ids[arch.value], f"{host}/{repo}:{tag}", host, creds, ca_bundle, policy, retries, size)
        child = arch_image(reg, repo, arch.value, tag, digest)
        if child.image_id != ids[arch.value]:
            raise RapidshipError(f"push {variant.id} {arch.value}", f"the registry holds image {child.image_id[:19]} "
                                 f"under {tag}, we pushed {ids[arch.value][:19]}", "run push again; no index was pushed")
        children.append(child)
    data, media = make_index(children)
    log(f"pushing {media.rsplit('.', 2)[-2]} {host}/{repo}:{variant.tag()} over {', '.join(c.arch for c in children)}")
    digest = reg.put_manifest(repo, variant.tag(), data, media)
    stored = reg.head_manifest(repo, variant.tag())
    if stored is None or stored.digest != digest:
        raise RapidshipError(f"push {variant.id}", f"the registry shows {stored.digest if stored else 'nothing'} "
                             f"under {variant.tag()}, we pushed {digest}", "someone else pushed the same tag: run again")
    return PushRecord(variant=variant.id, registry=host, repository=repo, tag=variant.tag(), index_digest=digest,
                      index_media_type=media, arches={c.arch: c for c in children}, gates_skipped=skip_gates,
                      pushed_at=_now(), seconds=round(time.monotonic() - start, 1), retries=retries.count)


def releases_under(reg: Registry, repo: str, ref: str) -> dict[str, tuple[str, Release | None]]:
    """What `repo:ref` holds now, per architecture: (image id, the release its config states); {} when
    nothing is there. Read as a loader would read it, through the manifests to each config."""
    if reg.head_manifest(repo, ref) is None:
        return {}
    top = reg.parse_manifest(reg.get_manifest(repo, ref)[0], f"{repo}:{ref}")
    children = [c["digest"] for c in top["manifests"]] if oci_json.is_index(top) else [None]
    out: dict[str, tuple[str, Release | None]] = {}
    for child in children:
        doc = top if child is None else reg.parse_manifest(reg.get_manifest(repo, child)[0], f"{repo}@{child}")
        config = oci_json.parse_or_none(reg.get_blob(repo, doc["config"]["digest"]))
        arch = str((config or {}).get("architecture", "")) if isinstance(config, dict) else ""
        out[arch] = (doc["config"]["digest"], release.of_config(config))
    return out


def promote_downgrades(reg: Registry, record: PushRecord, dst: str, tuf_version: int = 0) -> list[tuple[str, str]]:
    """(name, sentence) for every arch whose release the promotion would move `dst:tag` back to;
    `tuf_version`: the trusted targets version that resolved the staged images (release.refusal)."""
    now = releases_under(reg, dst, record.tag)
    incoming = releases_under(reg, record.repository, record.index_digest)
    found = []
    for arch, (image_id, stated) in sorted(incoming.items()):
        stated = replace(stated, tuf_version=tuf_version) if stated else None
        current_id, current = now.get(arch, ("", None))
        name = f"{record.registry}/{dst}:{record.tag} ({arch})"
        if sentence := release.refusal(name, current, current_id, stated, image_id):
            found.append((f"{current_id} ({current.describe() if current else ''})", sentence))
    return found


def promote(record: PushRecord, target: str, creds: Credentials | None, ca_bundle: str | None = None,
            policy: RetryPolicy = RetryPolicy(), log: Callable[[str], None] = lambda _: None,
            allow_downgrade: bool = False, tuf_version: int = 0) -> PromoteRecord:
    """Copy the staged index and everything under it into `target` (HOST/PROJECT) by digest. The
    release tag never moves to an older release than it holds now, unless `allow_downgrade`."""
    start = time.monotonic()
    if record.gates_skipped:
        raise GateFailure(f"promote {record.variant}", "the staged push skipped its gates (--skip-gates)",
                          "push again with passing gates; only gated digests are released")
    host, project = split_repository(target)
    if host != record.registry:
        raise ConfigError("--to", f"promotion copies within one registry; the push went to {record.registry}",
                          f"promote to {record.registry}/PROJECT (use skopeo copy --all between registries)")
    src = record.repository
    dst = f"{project}/{record.repository.split('/', 1)[1]}"
    if dst == src:
        raise ConfigError("--to", f"{target} is where the image already is", "name the release project")
    reg = Registry(host, creds, ca_bundle, policy, on_retry=RetryCounter(log=log))
    downgrades = promote_downgrades(reg, record, dst, tuf_version)
    if downgrades and not allow_downgrade:
        raise GateFailure(f"promote {record.variant}", "an older release would replace a newer one:\n  "
                          + "\n  ".join(s for _, s in downgrades) + "\nnothing was copied",
                          "promote the current release; to go back on purpose, pass --allow-downgrade (the record "
                          "then lists what the tag pointed at)")
    for _, sentence in downgrades:
        log(f"WARNING: --allow-downgrade: {sentence}")
    index, desc = reg.get_manifest(src, record.index_digest)
    children = reg.parse_manifest(index, f"{src}@{record.index_digest}")["manifests"]
    pushed = {a.digest: a for a in record.arches.values()}
    if sorted(c["digest"] for c in children) != sorted(pushed):
        raise GateFailure(f"promote {record.variant}", f"the staged index {record.index_digest[:19]} does not name "
                          "exactly the per-arch manifests push recorded", "push again; nothing was copied")
    how: list[str] = []
    for child in children:
        manifest, cdesc = reg.get_manifest(src, child["digest"])
        doc = reg.parse_manifest(manifest, f"{src}@{child['digest']}")
        if doc["config"]["digest"] != pushed[child["digest"]].image_id:
            raise GateFailure(f"promote {record.variant}", f"{src}@{child['digest'][:19]} is image "
                              f"{doc['config']['digest'][:19]}, push recorded {pushed[child['digest']].image_id[:19]}",
                              "push again; nothing was copied")
        how += [reg.copy_blob(src, dst, blob["digest"]) for blob in [doc["config"], *doc["layers"]]]
        reg.put_manifest(dst, child["digest"], manifest, cdesc.media_type)
    mounted, copied = how.count("mounted"), how.count("copied")
    digest = reg.put_manifest(dst, record.tag, index, desc.media_type)
    if digest != record.index_digest:
        raise RapidshipError(f"promote {record.variant}", f"release digest {digest} differs from staged "
                             f"{record.index_digest}", "report this: promotion must not change bytes")
    log(f"promoted {host}/{src}@{digest[:19]} -> {host}/{dst}:{record.tag} ({mounted} blobs mounted, {copied} copied)")
    return PromoteRecord(variant=record.variant, registry=host, source=src, target=dst, tag=record.tag, digest=digest,
                         blobs_mounted=mounted, blobs_copied=copied, promoted_at=_now(),
                         seconds=round(time.monotonic() - start, 1), downgraded_from=[d for d, _ in downgrades])


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def write_record(ws: Workspace, record: PushRecord | PromoteRecord) -> Path:
    path = ws.push(record.variant) if isinstance(record, PushRecord) else ws.promote(record.variant)
    return ws.save(path, record)


def read_push_record(ws: Workspace, variant: str) -> PushRecord:
    return ws.load(ws.push(variant), PushRecord, f"invoke push --variant {variant}", "push record")
