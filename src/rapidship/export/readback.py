"""export-verify without a registry: the archive the import would write, read back as a loader reads it.

The import writes its loader a new docker-archive from the disc (export/repack.py: every layer
re-hashed against the config's diff_ids, a delta's base layers read from this engine's store).
Here that archive goes through a pipe into a reader that trusts nothing the writer checked: it
reads the tar by name (Python's tarfile, as a loader would), hashes every member, and from
manifest.json alone finds each image: the config is the member its name says, the id is that
member's sha256, every layer named is a member whose sha256 is its name, and the config's
rootfs.diff_ids are those layers in that order. So a disc export-verify passes reconstructs the
signed images byte for byte, at the cost of reading it (no layer is compressed, written to disk or
pushed). `invoke export-verify --load` still pushes every image into a scratch registry, for a
proof that a registry takes the archive too.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import threading
from typing import IO, Callable

from rapidship import oci_json
from rapidship.errors import GateFailure
from rapidship.export import repack
from rapidship.export.verify import Checked

WHERE = "read back"  # a Loaded's `where` when nothing was loaded anywhere


def read_archive(stream: IO[bytes]) -> tuple[dict[str, str], dict[str, bytes]]:
    """Every regular member's name -> sha256 hex, and the bytes of the small ones (configs,
    manifest.json). A name seen twice is an error: a loader would take one of them."""
    hashes: dict[str, str] = {}
    small: dict[str, bytes] = {}
    with tarfile.open(fileobj=stream, mode="r|", bufsize=1 << 20) as tar:
        for member in tar:
            if not member.isfile():
                continue
            if member.name in hashes:
                raise tarfile.ReadError(f"the archive holds {member.name} twice")
            digest, held = hashlib.sha256(), []
            data = tar.extractfile(member)
            while chunk := data.read(1 << 20):  # type: ignore[union-attr]
                digest.update(chunk)
                if member.size <= repack.CONFIG_MAX:
                    held.append(chunk)
            hashes[member.name] = digest.hexdigest()
            if member.size <= repack.CONFIG_MAX:
                small[member.name] = b"".join(held)
    return hashes, small


def images_of(hashes: dict[str, str], small: dict[str, bytes]) -> tuple[dict[str, str], list[str]]:
    """Pure: tag -> image id, as manifest.json and the members' hashes say; and what is wrong."""
    manifest = oci_json.parse_or_none(small.get("manifest.json", b""))
    if not isinstance(manifest, list):
        return {}, ["the archive has no readable manifest.json"]
    ids: dict[str, str] = {}
    problems: list[str] = []
    for n, entry in enumerate(manifest):
        config, layers, tags = (entry.get(k) if isinstance(entry, dict) else None for k in ("Config", "Layers", "RepoTags"))
        if not (isinstance(config, str) and isinstance(layers, list) and isinstance(tags, list)):
            problems.append(f"manifest.json entry {n} lacks Config, Layers or RepoTags")
            continue
        wrong = [name for name in [config, *layers] if not isinstance(name, str) or name not in hashes
                 or name != f"{repack.BLOBS}/{hashes[name]}"]
        if wrong:
            problems.append(f"manifest.json entry {n}: {wrong[0]} is not a member whose sha256 is its name")
            continue
        listed = repack.diff_ids(small.get(config, b""))
        if listed != tuple(f"sha256:{hashes[name]}" for name in layers):
            problems.append(f"manifest.json entry {n}: its layers are not the config's rootfs.diff_ids "
                            f"({listed if isinstance(listed, str) else f'{len(listed)} listed'}, {len(layers)} named)")
            continue
        ids.update(dict.fromkeys(tags, f"sha256:{hashes[config]}"))
    return ids, problems


def read_back(checked: Checked, plan: repack.Plan, write: Callable[[IO[bytes]], None]) -> dict[str, str]:
    """`write(out)` writes the import's archive into a pipe (in a thread); read back here. Tag -> the
    id the archive gives it. Raises GateFailure naming what is wrong; the writer's own failure
    (repack.Changed) is re-raised as it is, since it says more than the torn archive it leaves."""
    read_fd, write_fd = os.pipe()
    reader, writer = os.fdopen(read_fd, "rb", buffering=1 << 20), os.fdopen(write_fd, "wb", buffering=1 << 20)
    failure: list[BaseException] = []

    def produce() -> None:
        try:
            write(writer)
        except BrokenPipeError:
            pass  # the reader stopped; what it raised says why
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)
        finally:
            try:
                writer.close()
            except BrokenPipeError:
                pass

    thread = threading.Thread(target=produce, name="import-archive", daemon=True)
    thread.start()
    problem = ""
    try:
        hashes, small = read_archive(reader)
    except tarfile.TarError as err:
        problem, hashes, small = f"the archive is not a readable tar ({err})", {}, {}
    finally:
        reader.close()
        thread.join()
    if failure:
        raise failure[0]
    ids, problems = images_of(hashes, small) if not problem else ({}, [problem])
    if problems:
        raise GateFailure("export-verify", f"the archive the import would load, read back: {'; '.join(problems)}",
                          f"report export {checked.export_id} with this message; do not import it")
    return ids
