"""Checked volumes -> images in Docker or in a registry, each id compared with the export's record.

Thin edge only: parts are sent in order (sendfile, no copy through Python) into `zstd -d`, whose
output is read twice by export/repack.py: once to find each image's config and layers by content
(`plan_load`), once to write the docker-archive a loader gets (`docker_load` streams it into
`docker load`; `registry_push` writes it to one temporary file that skopeo pushes). Before the
second pass, the names the images take are checked against what they point at now: an older
release never replaces a newer one unless the operator says so (`downgrades`, sign/release.py).
`scratch_registry` runs Debian's CNCF distribution (`docker-registry serve`) on 127.0.0.1 for
`invoke export-verify`, so a full load can be checked without touching the site's engine.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator, TypeVar

from rapidship import oci_json
from rapidship.diskspace import is_full, no_room, require_room, sized
from rapidship.engine import ENGINE
from rapidship.errors import ConfigError, GateFailure, RapidshipError
from rapidship.export import hostlayers, repack
from rapidship.export.scratch import work_folder
from rapidship.export.site import Ledger
from rapidship.export.trust import label, refusal
from rapidship.export.verify import Checked
from rapidship.publish.retrying import RetryPolicy, copy_deadline
from rapidship.sign import release
from rapidship.sign.release import Release

T = TypeVar("T")


@dataclass(frozen=True)
class Loaded:
    ref: str
    where: str  # the engine's ref, or the registry ref it was pushed to
    expected_id: str
    image_id: str
    manifest_digest: str = ""  # registry only: the digest the registry serves the image under
    downgraded_from: str = ""  # --allow-downgrade: the newer image (and release) the name pointed at before

    @property
    def ok(self) -> bool:
        return self.image_id == self.expected_id

    def report(self) -> dict:
        """For the JSON output: the fields that say something for this load (an engine load has no
        registry digest, a load that moved no name forward no older release)."""
        return {k: v for k, v in vars(self).items() if v != "" or k not in ("manifest_digest", "downgraded_from")}


def _feed(checked: Checked, sink, on_bytes: Callable[[int], None]) -> None:
    """Write every part, in order, into `sink` (a pipe)."""
    out = sink.fileno()
    for _part, s in checked.parts:
        with open(s.path, "rb") as fh:
            offset, left = s.offset, s.length
            while left:
                sent = os.sendfile(out, fh.fileno(), offset, min(left, 1 << 22))
                if sent == 0:
                    raise RapidshipError(str(s.path), "ended early while loading", "run the check again")
                offset += sent
                left -= sent
                on_bytes(sent)


def _decompress(checked: Checked, stdout, on_bytes: Callable[[int], None]) -> None:
    if not shutil.which("zstd"):
        raise ConfigError("invoke import", "zstd is not installed", "apt-get install zstd")
    zstd = subprocess.Popen(["zstd", "-dcq"], stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE)
    try:
        _feed(checked, zstd.stdin, on_bytes)
    except BrokenPipeError:
        pass  # zstd stopped reading; its exit code and message say why
    finally:
        zstd.stdin.close()
    problem = zstd.stderr.read().decode(errors="replace").strip()
    if zstd.wait() != 0:
        raise RapidshipError("zstd -d", f"decompression failed: {problem}", "verify the volumes: invoke export-verify")


class _Bounded:
    """The decompressed archive up to the size the export recorded: past it, end of file."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self.raw, self.left = raw, limit

    def readinto(self, buffer) -> int:
        got = self.raw.readinto(memoryview(buffer)[:self.left]) if self.left else 0
        self.left -= got or 0
        return got or 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(self.left if size < 0 else min(size, self.left)) if self.left else b""
        self.left -= len(data)
        return data


def recorded_size(checked: Checked) -> int:
    """archive.tar_bytes of MANIFEST.json: what the parts decompress to, the bound of every reader."""
    size = (checked.manifest.get("archive") or {}).get("tar_bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise refusal(["MANIFEST.json records no archive size (archive.tar_bytes): the disc was made or changed by "
                       "something other than invoke export"])
    return size


def decompressed(checked: Checked, consume: Callable[[IO[bytes]], T], on_bytes: Callable[[int], None]) -> T:
    """`consume` reads the decompressed archive from a pipe that a thread fills with zstd's output,
    never more than the size the export recorded: one byte past it refuses the disc (a zstd bomb is
    decompressed no further, as install.sh stops at $TAR_BYTES)."""
    size = recorded_size(checked)
    read_fd, write_fd = os.pipe()
    raw, writer = os.fdopen(read_fd, "rb", buffering=1 << 20), os.fdopen(write_fd, "wb")
    reader = _Bounded(raw, size)
    failure: list[BaseException] = []

    def decompress() -> None:
        try:
            _decompress(checked, writer, on_bytes)
        except BrokenPipeError:
            pass  # the consumer stopped reading; what it raised says why
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)
        finally:
            with contextlib.suppress(BrokenPipeError):
                writer.close()

    thread = threading.Thread(target=decompress, daemon=True)
    thread.start()
    try:
        try:
            result = consume(reader)
            while reader.read(1 << 20):  # zstd's output to the recorded size, so its exit code says all
                pass
            if raw.read(1):
                raise refusal([f"the parts decompress to more than the {size:,} bytes the export recorded: changed "
                               "after export"])
        finally:
            raw.close()
            thread.join()
    except tarfile.TarError as err:
        said = f"; zstd: {failure[0]}" if failure else ""
        raise refusal([f"the archive is not a readable tar ({err}{said}): the disc was made or changed by "
                       "something other than invoke export"]) from None
    if failure:
        raise failure[0]
    return result


def plan_load(checked: Checked, on_bytes: Callable[[int], None] = lambda _: None,
              for_docker: bool = True) -> repack.Plan:
    """Pass 1: each image MANIFEST.json lists (the signed ones, once verify_disc passed), its config
    and layers found in the archive by content, under the name the disc gives it. A delta disc's
    missing layers come from the host (`from_host`); `for_docker`: the loader is docker's, which
    takes a layer whose chain it holds from its own store."""
    wanted = [repack.Wanted(i["image_id"], (i["ref"],), label(i)) for i in checked.images]
    found = decompressed(checked, lambda r: repack.scan(r, {w.image_id for w in wanted}), on_bytes)
    held = hostlayers.images() if for_docker else None  # the engine's images, read once for both uses
    leave_out = held_by_engine(found, wanted, held) if held is not None else frozenset()
    plan, problems = repack.plan(found, wanted, leave_out=leave_out)
    extends = checked.manifest.get("extends") or {}
    if problems and extends:
        missing = repack.missing_layers(found, wanted)
        unlisted = sorted(missing - set(extends.get("layers") or []))
        if unlisted:
            raise refusal([f"layer {d[:23]}... is neither on the disc nor among the layers it says the host "
                           f"holds ({len(unlisted)} such)" for d in unlisted[:3]])
        plan, problems = from_host(found, wanted, extends, on_bytes, for_docker, leave_out, held)
    if problems:
        raise refusal(problems)
    return plan


def signed_configs(found: repack.Scan, wanted: list[repack.Wanted]) -> list[tuple[str, ...]]:
    """The diff_ids of each wanted image's config the archive holds (the signed ones)."""
    return [d for w in wanted if isinstance(d := repack.diff_ids(found.configs.get(w.image_id, b"")), tuple)]


def held_by_engine(found: repack.Scan, wanted: list[repack.Wanted], held: dict[str, list[str]]) -> frozenset[str]:
    """The disc's layers whose chain the engine (`held`: hostlayers.images()) holds wherever the
    signed configs list them: docker's loader would not read them, so they are not fed (a full disc
    onto an engine that holds the release, the layers below a patch's lowest change)."""
    return hostlayers.held_on_disc(signed_configs(found, wanted), lambda d: d[7:] in found.blobs,
                                   hostlayers.engine_layers(held))


def from_host(found: repack.Scan, wanted: list[repack.Wanted], extends: dict, on_bytes: Callable[[int], None],
              for_docker: bool, leave_out: frozenset[str] = frozenset(),
              held: dict[str, list[str]] | None = None) -> tuple[repack.Plan, list[str]]:
    """The layers a delta disc lacks, each by chain ID or by content, never by what the host names:
    docker's loader keeps those whose chain (from the signed config's diff_ids) the engine holds; the
    others are read from the engine's layer store and hashed; what that cannot give, from `docker
    save` of the images holding it. A layer in no image of the engine: one sentence, nothing loaded."""
    configs = signed_configs(found, wanted)
    held = hostlayers.images() if held is None else held
    need = hostlayers.sort_missing(configs, lambda d: d[7:] in found.blobs, hostlayers.engine_layers(held), for_docker)
    if need.absent:
        raise refusal([base_missing(extends, len(need.absent))])
    store = hostlayers.store()
    stored = hostlayers.measured(store, need.needed, on_bytes) if store else {}
    rest = set(need.needed) - set(stored)
    holders: list[str] = []
    saved = None
    if rest:
        holders, left = engine_holders(rest, [i.get("image_id", "") for i in extends.get("images") or []], held)
        if left:
            raise refusal([base_missing(extends, len(left))])
        saved = scan_engine(holders, on_bytes)
    missing = repack.missing_layers(found, wanted)
    plan, problems = repack.plan(found, wanted, saved, frozenset((missing - set(need.needed)) | set(stored)), leave_out)
    return dataclasses.replace(plan, held_images=tuple(holders), from_store=stored, skipped=need.skipped), problems


def base_missing(extends: dict, missing: int) -> str:
    """The one sentence a host without the release a delta disc extends gets."""
    names = ", ".join(sorted({i.get("ref", "") for i in extends.get("images") or []})) or "its images"
    return (f"this disc extends release {str(extends.get('export_id', ''))[:12]} of {extends.get('created', '?')} "
            f"({names}), and {missing} of its layers are in no image of this engine: load that release first "
            "(invoke import --from its disc), then this one; nothing was loaded")


def engine_holders(layers: set[str], prefer: list[str], held: dict[str, list[str]]) -> tuple[list[str], set[str]]:
    """Images of the engine (`held`: hostlayers.images()) that together hold `layers` (the base
    release's own first), and what none holds."""
    holds = {image_id: set(layers_) for image_id, layers_ in held.items()}
    order = [i for i in prefer if i in holds] + sorted(set(holds) - set(prefer))
    chosen, left = [], set(layers)
    for image_id in order:
        if left & holds[image_id]:
            chosen.append(image_id)
            left -= holds[image_id]
    return chosen, left


def scan_engine(image_ids: list[str], on_bytes: Callable[[int], None]) -> repack.Scan:
    """Pass 1 over `docker save` of the host's images: every layer, by content."""
    def counted(raw: IO[bytes]) -> repack.Scan:
        return repack.scan(_Counting(raw, on_bytes), set())

    with ENGINE.save(*image_ids) as raw:
        return counted(raw)


class _Counting:
    """A stream that reports the bytes read from it (progress over the host's archive)."""

    def __init__(self, raw: IO[bytes], on_bytes: Callable[[int], None]) -> None:
        self.raw, self.on_bytes = raw, on_bytes

    def readinto(self, view) -> int:
        n = self.raw.readinto(view) or 0
        self.on_bytes(n)
        return n


def held_archive(plan: repack.Plan):
    """What repack.write opens for the layers a delta disc takes from `docker save` (None for a full disc)."""
    return (lambda: ENGINE.save(*plan.held_images)) if plan.held_images else None


def stored_layers(plan: repack.Plan):
    """What repack.write reads the layers a delta disc takes from the engine's layer store with."""
    store = hostlayers.store() if plan.from_store else None
    return store.read if store else None


def _changed(err: repack.Changed) -> GateFailure:
    return GateFailure("import", f"the archive changed while it was read ({err}); the loader was given an archive "
                       "that ends in an unreadable block, so nothing was loaded",
                       "copy the volumes to a local disk, then run invoke export-verify and the import again")


def docker_load(checked: Checked, plan: repack.Plan, on_bytes: Callable[[int], None] = lambda _: None,
                allow_downgrade: bool = False, warn: Callable[[str], None] = lambda _: None,
                signed: dict[str, Release] | None = None, ledger: Ledger | None = None) -> list[Loaded]:
    """Pass 2 into `docker load`: the archive repack writes, never the disc's own; first the names
    are checked against what they point at in the engine now (and the site's `ledger` of serials)."""
    moved = check_downgrades(plan, engine_current, allow_downgrade, warn, signed or {}, ledger)
    load = ENGINE.load()
    output: list[bytes] = []
    reader = threading.Thread(target=lambda: output.append(load.stdout.read()), daemon=True)
    reader.start()
    try:
        decompressed(checked, lambda r: repack.write(r, plan, load.stdin, on_bytes, held_archive(plan),
                                                           stored_layers(plan)), lambda _: None)
    except repack.Changed as err:
        load.kill()
        raise _changed(err) from None
    except BrokenPipeError:
        pass  # docker load stopped reading: its exit code and output say why
    finally:
        with contextlib.suppress(BrokenPipeError):
            load.stdin.close()
        code = load.wait()
        reader.join()
    if code != 0:
        raise RapidshipError("docker load", f"failed: {b''.join(output).decode(errors='replace').strip()[-800:]}",
                             "check the engine and its disk space")
    loaded = []
    for image in checked.images:
        found = ENGINE.try_inspect(image["ref"])
        loaded.append(Loaded(image["ref"], image["ref"], image["image_id"], found["Id"] if found else "missing",
                             downgraded_from=_moved_from(moved, image["ref"])))
    return _recorded(_checked(loaded), signed, ledger)


@dataclass(frozen=True)
class Downgrade:
    name: str
    current_id: str
    current: str    # the release the name points at now
    incoming_id: str
    incoming: str   # the older release that replaces it


def downgrades(plan: repack.Plan, current: Callable[[str], tuple[str, dict | None]], signed: dict[str, Release],
               serials: dict[str, int]) -> tuple[list[Downgrade], list[str]]:
    """Pure over `current(name) -> (image id, config)` ('' when the name points at nothing), the
    releases the verified signatures state (`signed`, by image id: with their serials) and the
    serials the site recorded (`serials`, by image id): every planned name that would move to a
    release not shown to be newer, as records and as sentences."""
    found: list[Downgrade] = []
    sentences: list[str] = []
    for image in plan.images:
        incoming = signed.get(image.image_id) or release.of_config(oci_json.parse_or_none(image.config))
        for name in image.tags:
            current_id, config = current(name)
            now = release.of_config(config) if config is not None else None
            now = dataclasses.replace(now, serial=serials.get(current_id, 0)) if now else None
            if sentence := release.refusal(name, now, current_id, incoming, image.image_id):
                sentences.append(sentence)
                found.append(Downgrade(name, current_id, now.describe() if now else "",
                                       image.image_id, incoming.describe() if incoming else "none stated"))
    return found, sentences


def check_downgrades(plan: repack.Plan, current: Callable[[str], tuple[str, dict | None]], allow: bool,
                     warn: Callable[[str], None], signed: dict[str, Release], ledger: Ledger | None) -> list[Downgrade]:
    """Refuse (GateFailure) any move to an older release, unless `allow`: then say it loudly."""
    found, sentences = downgrades(plan, current, signed, ledger.serials() if ledger else {})
    if found and not allow:
        raise GateFailure("import", ("an older release would replace a newer one:\n  " + "\n  ".join(sentences)
                                     + "\nnothing was loaded"),
                          "ask the sender for the current release; to go back on purpose, pass --allow-downgrade "
                          "(the import then records the downgrade)")
    for sentence in sentences:
        warn(f"WARNING: --allow-downgrade: {sentence}")
    return found


def engine_current(name: str) -> tuple[str, dict | None]:
    """What `name` points at in the engine now: (image id, {"config": {"Labels": ...}}) or ('', None).
    A name without a tag means :latest, as docker load reads it; with one it is never an id prefix."""
    tagged = name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"
    info = ENGINE.try_inspect(tagged)
    if info is None:
        return "", None
    return info["Id"], {"config": {"Labels": (info.get("Config") or {}).get("Labels") or {}}}


def registry_path(ref: str, registry: str) -> str:
    """Registry ref for an image: its repository path (registry host dropped) under `registry`."""
    first, _, rest = ref.partition("/")
    path = rest if rest and ("." in first or ":" in first or first == "localhost") else ref
    return f"{registry.rstrip('/')}/{path}"


def _skopeo_access(tmp: Path, host: str, ca_cert: str | None) -> tuple[list[str], list[str]]:
    """(copy flags, inspect flags) that give skopeo the site's CA and credentials through files in
    the private temp dir: the CA as a cert dir, the credential as an auth file (0600), never argv."""
    from rapidship.publish.oci import credentials_for

    copy, inspect = [], []
    if ca_cert:
        if not Path(ca_cert).is_file():
            raise ConfigError("--ca-cert", f"{ca_cert} is not a file", "pass the PEM CA bundle that signs the registry")
        certs = tmp / "certs"
        certs.mkdir()
        shutil.copyfile(ca_cert, certs / "ca.crt")
        copy += ["--dest-cert-dir", str(certs)]
        inspect += ["--cert-dir", str(certs)]
    creds = credentials_for(host)
    if creds:
        auth = tmp / "auth.json"
        token = base64.b64encode(f"{creds.user}:{creds.password}".encode()).decode()
        fd = os.open(auth, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"auths": {host: {"auth": token}}}, fh)
        copy += ["--dest-authfile", str(auth)]
        inspect += ["--authfile", str(auth)]
    return copy, inspect


def registry_push(checked: Checked, plan: repack.Plan, registry: str, tls_verify: bool = True,
                  work: Path | None = None, on_bytes: Callable[[int], None] = lambda _: None,
                  on_image: Callable[[str], None] = lambda _: None, ca_cert: str | None = None,
                  allow_downgrade: bool = False, warn: Callable[[str], None] = lambda _: None,
                  signed: dict[str, Release] | None = None, ledger: Ledger | None = None) -> list[Loaded]:
    """Pass 2 into one temporary docker-archive (skopeo needs a seekable file), then each image
    pushed under its name, after the names were checked against what they point at now."""
    if not shutil.which("skopeo"):
        raise ConfigError("--registry", "pushing to a registry needs skopeo", "apt-get install skopeo, or leave out --registry")
    tls = f"--dest-tls-verify={str(tls_verify).lower()}"
    verify = f"--tls-verify={str(tls_verify).lower()}"
    with work_folder("rapidship-import-", work) as tmp:
        copy_access, inspect_access = _skopeo_access(Path(tmp), registry.split("/", 1)[0], ca_cert)
        where = {tag: registry_path(tag, registry) for image in plan.images for tag in image.tags}
        moved = check_downgrades(plan, lambda tag: registry_current(where[tag], [verify, *inspect_access]),
                                 allow_downgrade, warn, signed or {}, ledger)
        archive = Path(tmp) / "images.tar"
        # the archive skopeo pushes from: every planned member, a tar header and padding each
        needed = plan.layer_bytes + 1024 * (len(plan.sizes) + len(plan.held_sizes) + len(plan.from_store)) + 65536
        full = f"nothing was loaded (the push had not begun; {tmp} was removed)"
        require_room("--work", tmp.parent, needed, "the images' archive for skopeo", full)
        try:
            with open(archive, "wb") as fh:
                decompressed(checked, lambda r: repack.write(r, plan, fh, on_bytes, held_archive(plan),
                                                                 stored_layers(plan)), lambda _: None)
        except repack.Changed as err:
            raise _changed(err) from None
        except OSError as err:
            if is_full(err):
                archive.unlink(missing_ok=True)  # the room it took counts as free in the message
                raise no_room("--work", tmp.parent, sized(needed), full) from None
            raise
        _ids_before_push(checked, archive)
        loaded = []
        for image in checked.images:
            dest = where[image["ref"]]
            on_image(dest)
            _skopeo(["copy", "--quiet", tls, *copy_access, f"docker-archive:{archive}:{image['ref']}",
                     f"docker://{dest}"], dest, archive.stat().st_size)
            raw = _skopeo(["inspect", "--raw", verify, *inspect_access, f"docker://{dest}"], dest)
            config = _skopeo(["inspect", "--config", "--raw", verify, *inspect_access, f"docker://{dest}"], dest)
            served = json.loads(raw)["config"]["digest"]
            measured = "sha256:" + hashlib.sha256(config).hexdigest()
            # the registry's config digest and the hash of the config it serves must agree
            got = served if served == measured else f"{served} (config hashes to {measured})"
            loaded.append(Loaded(image["ref"], dest, image["image_id"], got,
                                 "sha256:" + hashlib.sha256(raw).hexdigest(), _moved_from(moved, image["ref"])))
    return _recorded(_checked(loaded), signed, ledger)


def read_back_check(checked: Checked, plan: repack.Plan, on_bytes: Callable[[int], None] = lambda _: None) -> list[Loaded]:
    """export-verify's proof without a registry: the archive pass 2 writes for a loader, read back by
    name and hashed (export/readback.py); each image's id is what that archive gives its name."""
    from rapidship.export.readback import WHERE, read_back

    def write(out: IO[bytes]) -> None:
        decompressed(checked, lambda r: repack.write(r, plan, out, on_bytes, held_archive(plan), stored_layers(plan)),
                     lambda _: None)

    try:
        ids = read_back(checked, plan, write)
    except repack.Changed as err:
        raise _changed(err) from None
    loaded = [Loaded(image["ref"], WHERE, image["image_id"], ids.get(image["ref"], "")) for image in checked.images]
    if bad := [f"{x.ref}: {x.image_id or 'not in the archive'}, expected {x.expected_id}" for x in loaded if not x.ok]:
        raise GateFailure("export-verify", "the archive the import would load gives other images than the export's "
                          "record:\n  " + "\n  ".join(bad), f"report export {checked.export_id}; do not import it")
    return loaded


def _recorded(loaded: list[Loaded], signed: dict[str, Release] | None, ledger: Ledger | None) -> list[Loaded]:
    """The site's ledger learns the signed serial of every image now in place."""
    if ledger is not None:
        ledger.record({x.image_id: signed[x.image_id] for x in loaded if x.image_id in (signed or {})})
    return loaded


_ABSENT = ("manifest unknown", "name unknown", "not found", "NOT_FOUND")


def registry_current(dest: str, flags: list[str]) -> tuple[str, dict | None]:
    """What `dest` (HOST/REPO:TAG) serves now: (image id, config) for this host's platform, or ('', None)."""
    proc = _deadlined(["skopeo", "--insecure-policy", "inspect", "--config", "--raw", *flags, f"docker://{dest}"],
                      f"skopeo inspect {dest}")
    if proc.returncode != 0:
        said = proc.stderr.decode(errors="replace")
        if any(word in said for word in _ABSENT):
            return "", None
        raise RapidshipError(f"skopeo inspect {dest}", said.strip()[-800:],
                             "check that the registry is up and reachable (its current images are compared first)")
    return "sha256:" + hashlib.sha256(proc.stdout).hexdigest(), oci_json.parse_or_none(proc.stdout)


def _moved_from(moved: list[Downgrade], name: str) -> str:
    return next((f"{d.current_id} ({d.current})" for d in moved if d.name == name), "")


def _ids_before_push(checked: Checked, archive: Path) -> None:
    """Every image of the written archive, as skopeo reads it, is the id the export recorded:
    checked for all of them before the first push, so a wrong archive leaves the registry untouched."""
    bad = []
    for image in checked.images:
        config = _skopeo(["inspect", "--config", "--raw", f"docker-archive:{archive}:{image['ref']}"], image["ref"])
        got = "sha256:" + hashlib.sha256(config).hexdigest()
        if got != image["image_id"]:
            bad.append(f"{image['ref']}: the archive holds id {got}, the export recorded {image['image_id']}")
    if bad:
        raise GateFailure("import", "the archive's images differ from the export's record, before anything was "
                          "pushed:\n  " + "\n  ".join(bad), "verify the volumes (invoke export-verify --key) and "
                          "report the export id")


def _skopeo(args: list[str], what: str, size: int = 0) -> bytes:
    """skopeo ARGS, within copy_deadline of its `size` bytes: a registry that stops answering is named."""
    proc = _deadlined(["skopeo", "--insecure-policy", *args], f"skopeo {args[0]} {what}", size)
    if proc.returncode != 0:
        raise RapidshipError(f"skopeo {args[0]} {what}", proc.stderr.decode(errors="replace").strip()[-800:],
                             "check that the registry is up and reachable")
    return proc.stdout


def _deadlined(cmd: list[str], what: str, size: int = 0) -> subprocess.CompletedProcess:
    deadline = copy_deadline(RetryPolicy.from_env(), size)
    try:
        return subprocess.run(cmd, capture_output=True, check=False, timeout=deadline)
    except subprocess.TimeoutExpired:  # run() has killed it
        raise RapidshipError(what, f"no answer from the registry within {deadline:.0f} s; nothing more was pushed",
                             "check that the registry is up and answers, then import again (RAPIDSHIP_RETRY_TIMEOUT: "
                             "the seconds each wait may take, plus 1 s per MB copied)") from None


def _checked(loaded: list[Loaded]) -> list[Loaded]:
    bad = [f"{x.where}: id {x.image_id}, expected {x.expected_id}" for x in loaded if not x.ok]
    if bad:
        raise GateFailure("import", "loaded images differ from the export's record:\n  " + "\n  ".join(bad),
                          "verify the volumes (invoke export-verify) and report the export id")
    return loaded


@contextlib.contextmanager
def scratch_registry(work: Path | None = None) -> Iterator[str]:
    """A throwaway registry on 127.0.0.1 (Debian's docker-registry); yields HOST:PORT, removes it after."""
    binary = shutil.which("docker-registry")
    if not binary:
        raise ConfigError("invoke export-verify", "the scratch registry needs docker-registry", "apt-get install docker-registry")
    with tempfile.TemporaryDirectory(prefix="rapidship-registry-", dir=work) as tmp:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        config = Path(tmp) / "config.yml"
        config.write_text(f"version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: {{rootdirectory: {tmp}/data}}\n"
                          f"http:\n  addr: 127.0.0.1:{port}\n")
        log = open(Path(tmp) / "registry.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for(f"http://127.0.0.1:{port}/v2/", proc, Path(tmp) / "registry.log")
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback never goes through a proxy


def _wait_for(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RapidshipError("docker-registry", f"exited at start: {log.read_text()[-500:]}", "check its config")
        try:
            with _DIRECT.open(url, timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RapidshipError("docker-registry", f"no answer on {url} after 20 s", "check that nothing blocks loopback")
