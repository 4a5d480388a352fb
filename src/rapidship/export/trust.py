"""Signatures on discs: what export carries, and what import checks against a key before loading.

Export: `find_signed` picks each image's signed bundle from the workspace (what `invoke sign` kept
under build/<variant>/signed/sha256-<hex>/, found through the sign records by image id) and
`disc_files` lays it out under `signatures/sha256-<hex>/` on every volume, with `payload.json` and
`payload.sig` (the signed payload and its signature, flat, for install.sh and openssl).

Import, all before anything is loaded (`verify_disc`):
  1. the disc names the key its images were signed with (MANIFEST.json `signing_key_fingerprint`);
     it must be the key given out of band (--key);
  2. every image: `sign.verify.verify_image` over the disc's signatures/ folder (the rules
     `invoke verify` runs against a registry: signature over exactly this manifest digest, SBOM and
     provenance attestations whose subject it is, provenance matching the config's labels), and
     the signed manifest's config digest is the image id MANIFEST.json lists;
  3. one streaming pass over the decompressed archive (`scan_tar`, then the pure `check_archive`):
     every image the archive would create (its manifest.json, and index.json where a newer engine
     wrote one) has a config that hashes to its name and is one of the signed ids, every layer
     tar hashes to the diff_id its config lists at that position, every blob to its name.
The chain: key -> signature -> manifest digest -> config digest = image id (kept by docker save
and docker load) -> the config's rootfs.diff_ids -> the layer tars in the archive.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import tarfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable

from rapidship import oci_json
from rapidship.errors import ConfigError, GateFailure
from rapidship.export.carry import PAYLOAD, PAYLOAD_SIG, SIGNATURES, flat_payload
from rapidship.sign import formats as f

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

    from rapidship.export.verify import Checked

_HEX = r"[0-9a-f]{64}"
_DISC_NAME = re.compile(rf"^{SIGNATURES}/sha256-{_HEX}/(manifest\.json|sig\.json|att\.json|payload\.json|payload\.sig|"
                        rf"blobs/sha256-{_HEX})$")
_BLOB = re.compile(rf"^sha256-{_HEX}$")
KEEP_MAX = 16 << 20  # archive members kept in memory while scanning: configs, manifests, indexes
_UNCOMPRESSED = {"application/vnd.oci.image.layer.v1.tar", "application/vnd.docker.image.rootfs.diff.tar"}
_INDEXES = {f.OCI_INDEX, "application/vnd.docker.distribution.manifest.list.v2+json"}


# ---- import side: flags and the disc's signatures ----------------------------------------------

def require_key(key: str | None, no_verify: bool) -> "ec.EllipticCurvePublicKey | None":
    """--key cosign.pub, or an explicit --no-verify; neither is bad input, never 'trust the disc'."""
    from rapidship.sign.keys import load_public

    if key and no_verify:
        raise ConfigError("--key / --no-verify", "both given", "pass --key cosign.pub to verify, or --no-verify alone")
    if not key and not no_verify:
        raise ConfigError("--key", "no public key: every image is checked against the key that signed it "
                          "before anything is loaded",
                          "pass --key cosign.pub (the public key given to you out of band, never one from a disc); "
                          "--no-verify loads without checking signatures")
    return load_public(key, "--key") if key else None


@dataclass
class Trust:
    """What verify_disc established: the key, and per signed image id the image and its digest."""

    fingerprint: str
    images: dict[str, dict] = field(default_factory=dict)  # image id -> MANIFEST.json image entry
    names: dict[str, set[str]] = field(default_factory=dict)  # image id -> the names its verified signature allows
    checked: list[str] = field(default_factory=list)


def refusal(problems: list[str]) -> GateFailure:
    head = problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n  " + "\n  ".join(problems)
    return GateFailure("signature check", head + "\nnothing was loaded",
                       "do not use this disc: ask the sender for a new one (and check that --key is the key they sign with)")


def label(image: dict) -> str:
    return f"image {image.get('ref')} ({str(image.get('image_id'))[:19]})"


def materialize(checked: "Checked", into: Path) -> Path:
    """The signatures/ folder of the lowest volume, copied into `into` (from a directory or straight
    out of an ISO), each file checked again against its manifest; every volume must carry the same."""
    from rapidship.export.verify import read_slice

    first = min(checked.volumes)
    ref = checked.volumes[first]
    mine = {n: m["sha256"] for n, m in ref.manifest["files"].items() if n.startswith(SIGNATURES + "/")}
    problems = [f"{v.name()}: its signatures/ differ from volume {first}'s: copy this volume again"
                for _, v in sorted(checked.volumes.items())
                if {k: m["sha256"] for k, m in v.manifest["files"].items() if k.startswith(SIGNATURES + "/")} != mine]
    problems += [f"{ref.name()}: unexpected file {n} under signatures/" for n in sorted(mine) if not _DISC_NAME.match(n)]
    if problems:
        raise refusal(problems)
    root = into / SIGNATURES
    root.mkdir(parents=True, exist_ok=True)
    for name, digest in sorted(mine.items()):
        data = read_slice(ref.files[name])
        if hashlib.sha256(data).hexdigest() != digest:
            raise refusal([f"{ref.name()}: {name} changed since it was checked: read the volume again"])
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def check_signatures(checked: "Checked", key: "ec.EllipticCurvePublicKey", key_path: str, root: Path) -> Trust:
    """Steps 1 and 2 over the disc's signatures/ folder (already copied to `root`)."""
    from rapidship.sign.keys import fingerprint
    from rapidship.sign.sources import DirSource
    from rapidship.sign.verify import verify_image

    given = fingerprint(key)
    claims = {v.manifest.get("signing_key_fingerprint") or "" for v in checked.volumes.values()}
    disc = checked.manifest.get("signing_key_fingerprint") or ""
    if len(claims) > 1:
        raise refusal([f"the volumes name different signing keys ({', '.join(sorted(c or 'none' for c in claims))})"])
    unsigned = [f"{label(i)} was exported unsigned (--unsigned): it cannot be verified against {key_path}; "
                "load it only if you trust the disc without a signature (--no-verify)"
                for i in checked.images if not i.get("signed_digest")]
    if not disc:
        raise refusal(unsigned or ["the disc names no signing key: it was exported unsigned"])
    if disc != given:
        raise refusal([f"the disc was signed with key {disc}, but --key {key_path} is key {given}: "
                       "pass the public key of whoever signed this disc, or refuse the disc"])
    trust = Trust(fingerprint=given)
    src = DirSource(root, where="the disc's signatures/")
    problems = list(unsigned)
    for image in checked.images:
        digest = str(image.get("signed_digest") or "")
        if not digest:
            continue
        verdicts = verify_image(src, digest, key)
        bad = [p for v in verdicts for p in v.problems]
        ids = {v.image_id for v in verdicts if v.kind == "image"}
        names = {n for v in verdicts for n in v.names}
        if bad:
            problems += [f"{label(image)}: {p}" for p in bad]
        elif ids != {image.get("image_id")}:
            problems.append(f"{label(image)}: the signed manifest {digest[:19]} is of image "
                            f"{', '.join(i[:19] for i in sorted(ids))}, not of the id MANIFEST.json lists (swapped)")
        elif image.get("ref") not in names:
            signed_names = ", ".join(sorted(names)) or "none: signed before names were signed, sign it again"
            problems.append(f"{label(image)}: MANIFEST.json names it {image.get('ref')}, a name its signature does not "
                            f"cover (signed names: {signed_names})")
        elif problem := _flat_problem(src, root, digest):
            problems.append(f"{label(image)}: {problem}")
        else:
            trust.images.setdefault(image["image_id"], image)
            trust.names.setdefault(image["image_id"], set()).update(names)
            trust.checked.append(f"{image['ref']}: " + "; ".join(c for v in verdicts for c in v.checked))
    if problems:
        raise refusal(problems)
    return trust


def _flat_problem(src, root: Path, digest: str) -> str:
    """payload.json / payload.sig (what install.sh checks with openssl) are sig.json's own."""
    folder = root / f.tag_for(digest, "")
    want = flat_payload(src.manifest(f.tag_for(digest, "sig")), src.blob)
    try:
        have = ((folder / PAYLOAD).read_bytes(), (folder / PAYLOAD_SIG).read_bytes())
    except OSError:
        return f"{PAYLOAD} or {PAYLOAD_SIG} is missing from signatures/{folder.name}/"
    return "" if have == want else (f"signatures/{folder.name}/{PAYLOAD} or {PAYLOAD_SIG} differ from the signature "
                                    "in sig.json (changed or swapped)")


# ---- import side: the archive ------------------------------------------------------------------

@dataclass(frozen=True)
class Member:
    """One archive member as the scan saw it: its sha256, and its bytes when it may be metadata."""

    sha256: str = ""
    size: int = 0
    data: bytes | None = None
    link: str = ""     # a symlink's or hard link's target, as an archive path
    kind: str = "file"


def _norm(name: str) -> str:
    return posixpath.normpath("/" + name).lstrip("/")


def _maybe_metadata(name: str, size: int) -> bool:
    return size <= KEEP_MAX and (name in ("manifest.json", "index.json") or bool(re.fullmatch(rf"{_HEX}\.json", name))
                                 or name.startswith("blobs/"))


class _Tail:
    """A stream reader that notes where the last non-zero byte was: whatever follows the tar's end
    marker must be zero padding, or another reader (docker's) could see members this one did not."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.pos, self.last_data = stream, 0, 0

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        if kept := len(data.rstrip(b"\0")):
            self.last_data = self.pos + kept
        self.pos += len(data)
        return data

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


class Members(dict):
    """name -> Member of one scanned archive, and the names it spells ambiguously: `spelling`
    lists members whose name is not as docker save writes it, or that clean to the name of another
    member. Each reader of a tar picks its own copy of a repeated name (the first, the last, the one
    a tool's name matching happens to hit), so such an archive is refused whole, never resolved."""

    def __init__(self) -> None:
        super().__init__()
        self.spelling: list[str] = []


def scan_tar(stream: IO[bytes], on_member: Callable[[int], None] = lambda _: None) -> Members:
    """Every member of a docker-archive read once, in order, without extracting anything: name ->
    Member (a later member of the same name replaces an earlier one, as extraction would, and the
    repetition is noted in `spelling`). Reads the stream to its end; data after the archive's end
    marker is a TarError."""
    members = Members()
    seen: set[str] = set()
    tail = _Tail(stream)
    with tarfile.open(fileobj=tail, mode="r|") as tar:  # type: ignore[call-overload]
        for m in tar:
            name = _norm(m.name)
            if m.name != name:
                members.spelling.append(f"archive member {m.name!r} is not spelled as docker save writes names "
                                        f"(it means {name!r})")
            if name in seen:
                members.spelling.append(f"the archive holds {name!r} more than once: each reader could take "
                                        "another copy")
            seen.add(name)
            if m.isdir():
                continue
            if m.issym():
                members[name] = Member(link=_norm(posixpath.join(posixpath.dirname(name), m.linkname)), kind="link")
                continue
            if m.islnk():
                members[name] = Member(link=_norm(m.linkname), kind="link")
                continue
            if not m.isfile():
                members[name] = Member(kind="other")
                continue
            handle = tar.extractfile(m)
            assert handle is not None
            digest, kept = hashlib.sha256(), []
            keep = _maybe_metadata(name, m.size)
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                if keep:
                    kept.append(chunk)
            data = b"".join(kept) if keep else None
            members[name] = Member(digest.hexdigest(), m.size, data if data and data[:1] in (b"{", b"[") else None)
            on_member(m.size)
        end = tar.offset
    tail.drain()
    if tail.last_data > end:
        raise tarfile.TarError(f"{tail.last_data - end} bytes of data after the end of the archive at byte {end}")
    return members


def resolve(members: dict[str, Member], name: str) -> Member | None:
    m = members.get(_norm(name))
    for _ in range(8):
        if m is None or m.kind != "link":
            return m if m is not None and m.kind == "file" else None
        m = members.get(m.link)
    return None


def _strict_json(data: bytes | None):
    """manifest.json of the archive: the unsigned document that says what gets loaded. None when it
    is not JSON a Go decoder would read the same way (oci_json)."""
    return oci_json.parse_or_none(data)


def _strict_manifest(data: bytes | None):
    """index.json and the OCI manifests it names, as the image-spec has them (oci_json), or None."""
    try:
        return oci_json.parse_manifest(data)
    except oci_json.Ambiguous:
        return None


def check_archive(members: Members, trust: Trust) -> list[str]:
    """Pure: every image the archive would load is a signed one, with its own layers. Problems,
    one line each, naming the image (ref and id) and what was swapped."""
    problems: list[str] = list(members.spelling)
    if problems:  # which copy of a name is "the" member is exactly what cannot be known
        return problems + ["the archive names its members ambiguously (not as docker save writes them): refused"]
    by_id = trust.images

    def who(image_id: str, tags: list[str]) -> str:
        if image_id in by_id:
            return label(by_id[image_id])
        return f"image {', '.join(tags) or '(untagged)'} ({image_id[:19]})"

    for name, m in sorted(members.items()):
        if name.startswith("blobs/sha256/") and (got := resolve(members, name)) is not None \
                and got.sha256 != name.rsplit("/", 1)[1]:
            problems.append(f"archive member {name} does not hash to its name (sha256 {got.sha256[:16]}...): changed or swapped")
    manifest = resolve(members, "manifest.json")
    entries = _strict_json(manifest.data) if manifest else None
    if not isinstance(entries, list) or not entries:
        return problems + ["the archive has no usable manifest.json (docker load would read it another way): refused"]
    seen: set[str] = set()
    for entry in entries:
        if not isinstance(entry, dict):
            problems.append("manifest.json of the archive holds something that is not an image entry")
            continue
        config_name, tags = str(entry.get("Config", "")), [str(t) for t in entry.get("RepoTags") or []]
        layers = [str(x) for x in entry.get("Layers") or []]
        config = resolve(members, config_name)
        named = re.fullmatch(rf"(?:blobs/sha256/)?({_HEX})(?:\.json)?", config_name)
        if config is None or config.data is None:
            problems.append(f"image {', '.join(tags) or '(untagged)'}: its config {config_name} is not in the archive")
            continue
        image_id = "sha256:" + config.sha256
        who_ = who(image_id, tags)
        if not named or named.group(1) != config.sha256:
            problems.append(f"{who_}: its config {config_name} does not hash to its name: changed or swapped")
        if image_id not in by_id:
            problems.append(f"{who_} in the archive is not a signed image: no signature on this disc covers "
                            "that id (the archive was swapped, or an image added)")
            continue
        seen.add(image_id)
        allowed = trust.names.get(image_id, set())
        problems += [f"{who_}: the archive tags it {t}, a name its signature does not cover" for t in tags if t not in allowed]
        diff_ids = ((_strict_json(config.data) or {}).get("rootfs") or {}).get("diff_ids") or []
        if len(layers) != len(diff_ids):
            problems.append(f"{who_}: the archive lists {len(layers)} layers, its signed config {len(diff_ids)}")
            continue
        for i, (layer, diff_id) in enumerate(zip(layers, diff_ids), 1):
            got = resolve(members, layer)
            if got is None:
                problems.append(f"{who_}: layer {i} of {len(layers)} ({layer}) is not in the archive")
            elif "sha256:" + got.sha256 != diff_id:
                problems.append(f"{who_}: layer {i} of {len(layers)} ({layer}) was swapped: it hashes to "
                                f"sha256:{got.sha256[:16]}..., the signed config lists {diff_id[:23]}...")
    problems += _check_index(members, by_id, who)
    problems += [f"{label(image)} is listed in MANIFEST.json but the archive does not hold it"
                 for image_id, image in by_id.items() if image_id not in seen]
    return problems


def _check_index(members: dict[str, Member], by_id: dict[str, dict], who) -> list[str]:
    """index.json (OCI layout, newer engines; what a containerd image store loads from): every
    manifest it reaches must be of a signed image, its uncompressed layers the config's diff_ids."""
    index = resolve(members, "index.json")
    if index is None:
        return []
    problems: list[str] = []
    todo, done = [(_strict_manifest(index.data), "index.json")], 0
    while todo and done < 256:
        doc, where = todo.pop()
        done += 1
        if not isinstance(doc, dict):
            problems.append(f"{where} of the archive is not an OCI index")
            continue
        for desc in doc.get("manifests") or []:
            digest = str((desc or {}).get("digest", "")) if isinstance(desc, dict) else ""
            blob = resolve(members, "blobs/" + digest.replace(":", "/", 1)) if digest.startswith("sha256:") else None
            body = _strict_manifest(blob.data) if blob else None
            if not isinstance(body, dict):
                problems.append(f"{where} names {digest[:19] or 'a manifest'}, which is not in the archive")
            elif body.get("mediaType") in _INDEXES or "manifests" in body:
                todo.append((body, f"index {digest[:19]}"))
            else:
                problems += _check_oci_manifest(members, body, digest, by_id, who)
    return problems


def _check_oci_manifest(members, body: dict, digest: str, by_id, who) -> list[str]:
    config_id = str((body.get("config") or {}).get("digest", ""))
    tags = [str(((body.get("annotations") or {}).get("org.opencontainers.image.ref.name")) or "")]
    name = who(config_id, [t for t in tags if t])
    if config_id not in by_id:
        return [f"{name} (manifest {digest[:19]} in index.json) is not a signed image: no signature on this disc "
                "covers that id (the archive was swapped, or an image added)"]
    config = resolve(members, "blobs/" + config_id.replace(":", "/", 1))
    diff_ids = ((_strict_json(config.data) if config else None) or {}).get("rootfs", {}).get("diff_ids") or []
    layers = [x for x in body.get("layers") or [] if isinstance(x, dict)]
    if len(layers) != len(diff_ids):
        return [f"{name}: manifest {digest[:19]} lists {len(layers)} layers, its signed config {len(diff_ids)}"]
    return [f"{name}: layer {i} of {len(layers)} in manifest {digest[:19]} was swapped: it is "
            f"{str(x.get('digest'))[:23]}..., the signed config lists {d[:23]}..."
            for i, (x, d) in enumerate(zip(layers, diff_ids), 1)
            if x.get("mediaType") in _UNCOMPRESSED and x.get("digest") != d]


def scan_archive(checked: "Checked", on_bytes: Callable[[int], None] = lambda _: None) -> Members:
    """The parts, decompressed by zstd as for the load, read by `scan_tar` through a pipe."""
    from rapidship.export.load import _decompress

    read_fd, write_fd = os.pipe()
    reader, writer = os.fdopen(read_fd, "rb", buffering=1 << 20), os.fdopen(write_fd, "wb")
    failure: list[BaseException] = []

    def decompress() -> None:
        try:
            _decompress(checked, writer, on_bytes)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)
        finally:
            writer.close()

    thread = threading.Thread(target=decompress, daemon=True)
    thread.start()
    try:
        try:
            members = scan_tar(reader)
        finally:
            reader.close()
            thread.join()
    except tarfile.TarError as err:
        said = f"; zstd: {failure[0]}" if failure else ""
        raise refusal([f"the archive is not a readable docker-archive ({err}{said}): the disc was made or changed "
                       "by something other than invoke export"]) from None
    if failure:
        raise failure[0]
    return members


def verify_disc(checked: "Checked", key: "ec.EllipticCurvePublicKey", key_path: str, work: Path | None = None,
                on_bytes: Callable[[int], None] = lambda _: None) -> Trust:
    """Steps 1-3; raises one GateFailure naming every refused image. Nothing is loaded here."""
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="rapidship-trust-", dir=work))
    try:
        trust = check_signatures(checked, key, key_path, materialize(checked, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    problems = check_archive(scan_archive(checked, on_bytes), trust)
    if problems:
        raise refusal(problems)
    return trust


def skipped(checked: "Checked") -> str:
    """What --no-verify leaves unchecked, said plainly."""
    disc = checked.manifest.get("signing_key_fingerprint") or "no key (exported unsigned)"
    images = "\n".join(f"  {label(i)}: " + (f"signed as {str(i['signed_digest'])[:19]}, signature and attestations "
                                             "NOT checked" if i.get("signed_digest") else "exported unsigned")
                       for i in checked.images)
    return ("WARNING: --no-verify: these images are loaded WITHOUT checking them against a signing key:\n"
            f"{images}\n  not checked: the key (the disc names {disc}), each image's signature, SBOM and provenance "
            "attestations, and that the archive holds only those signed images and their layers.\n"
            "  Still checked: the volumes' checksums and the loaded image ids against MANIFEST.json.")
