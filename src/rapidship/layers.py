"""Stream the files of an image without unpacking it to disk.

`saved_image(ref)`: the config JSON and every layer's files, in order, from `docker save`
(deleted files included: a secret removed by a later layer still ships in the earlier one).
`final_files(ref)`: the flattened filesystem from `docker export` of a created container.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Iterator

from rapidship.errors import RapidshipError


@dataclass(frozen=True)
class FileEntry:
    layer: str  # layer id in the archive, or "final"
    path: str
    mode: int
    size: int
    is_file: bool


@contextmanager
def _stream(cmd: list[str]) -> Iterator[IO[bytes]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        yield proc.stdout
    finally:
        proc.stdout.close()
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        code = proc.wait()
        if code not in (0, -13, 141) and stderr:  # 141/-13: we stopped reading early (SIGPIPE)
            raise RapidshipError(" ".join(cmd[:3]), f"failed: {stderr.strip()[-300:]}", "check the image ref and engine")


def saved_image(ref: str) -> Iterator[tuple[str, FileEntry | None, IO[bytes] | None]]:
    """Yields ("config", None, json bytes stream) and ("file", entry, content stream) items."""
    with _stream(["docker", "save", ref]) as raw:
        outer = tarfile.open(fileobj=raw, mode="r|")
        for member in outer:
            name = member.name
            if name.endswith(".json") and name not in ("manifest.json", "repositories") and "/" not in name:
                yield "config", None, outer.extractfile(member)
            elif name.endswith("layer.tar") or (name.startswith("blobs/") and member.isfile()):
                inner_fobj = outer.extractfile(member)
                if inner_fobj is None:
                    continue
                try:
                    inner = tarfile.open(fileobj=inner_fobj, mode="r|")
                except tarfile.ReadError:
                    continue  # an OCI blob that is not a layer (config, manifest)
                for f in inner:
                    entry = FileEntry(layer=name.split("/")[0], path="/" + f.name.lstrip("./"), mode=f.mode,
                                      size=f.size, is_file=f.isfile())
                    yield "file", entry, inner.extractfile(f) if f.isfile() else None


def final_files(ref: str) -> Iterator[tuple[FileEntry, IO[bytes] | None]]:
    """Files of the flattened image; the content stream is valid until the next item."""
    created = subprocess.run(["docker", "create", ref, "true"], capture_output=True, text=True, check=False)
    if created.returncode != 0:
        raise RapidshipError(ref, f"cannot create a container: {created.stderr.strip()}", "build the image first")
    cid = created.stdout.strip()
    try:
        with _stream(["docker", "export", cid]) as raw:
            archive = tarfile.open(fileobj=raw, mode="r|")
            tar_content = archive.extractfile
            for f in archive:
                entry = FileEntry(layer="final", path="/" + f.name.lstrip("./"), mode=f.mode, size=f.size,
                                  is_file=f.isfile())
                yield entry, tar_content(f) if f.isfile() else None
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False)


def image_config(ref: str) -> dict:
    proc = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RapidshipError(ref, "image not found in the engine", "build it first with invoke build")
    return json.loads(proc.stdout)[0]


def image_history(ref: str) -> list[str]:
    proc = subprocess.run(["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", ref],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RapidshipError(ref, "cannot read image history", "build it first with invoke build")
    return proc.stdout.splitlines()
