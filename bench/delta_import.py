"""How long a delta disc takes to import, against the full disc of the same release, on this engine.

    python bench/delta_import.py --image REF [--layer K] [--patch-bytes N] [--json OUT]

From one image in the engine (e.g. the CPU image), makes its own release pair with real layers:
N = REF's layers under one small marker layer of this run (so no chain of N is already in the
engine and every layer is really loaded), N+1 = N with layer K (counted from REF's first layer;
default: the middle one) patched by one file of random bytes, as a one-package update patches one
layer of the env. Exports N whole, N+1 whole and N+1 `--since` N (unsigned, through `invoke`),
then times `invoke import --no-verify` of the full N+1 disc on an engine without N or N+1, and of
the delta on an engine holding N. Prints seconds, archive bytes and the goal
delta time <= full time x 1.5 x delta bytes / full bytes + 5 s. Removes only the images it made.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _docker(*args: str, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], input=stdin, capture_output=True, check=True)


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 946684800
    return info, data


def make_pair(ref: str, layer: int | None, patch_bytes: int, work: Path, prefix: str) -> tuple[str, str, int]:
    """Load N and N+1 (see the module's text) under PREFIX/bench:n and :n1; returns their refs and K."""
    saved = work / "saved.tar"
    with open(saved, "wb") as fh:
        subprocess.run(["docker", "save", ref], stdout=fh, check=True)
    with tarfile.open(saved) as outer:
        entry = json.load(outer.extractfile("manifest.json"))[0]
        config = json.load(outer.extractfile(entry["Config"]))
        layers = [outer.extractfile(name).read() for name in entry["Layers"]]
    k = len(layers) // 2 if layer is None else layer
    marker = _tar([_file(f"{prefix.replace('/', '-')}.marker", prefix.encode())])
    with tarfile.open(fileobj=io.BytesIO(layers[k])) as old:
        members = [(m, old.extractfile(m).read() if m.isfile() else None) for m in old.getmembers()]
    patched = _tar(members + [_file(f"opt/rapidship-bench-patch-{uuid.uuid4().hex[:8]}", os.urandom(patch_bytes))])
    refs = []
    for tag, body in (("n", layers), ("n1", layers[:k] + [patched] + layers[k + 1:])):
        body = [marker, *body]
        doc = dict(config, rootfs={"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(b).hexdigest() for b in body]},
                   history=[{"created_by": "bench marker"}, *config.get("history", [])])
        raw = json.dumps(doc).encode()
        image_ref = f"{prefix}/bench:{tag}"
        files = [_file(f"{hashlib.sha256(b).hexdigest()}.tar", b) for b in body]
        files.append(_file("config.json", raw))
        files.append(_file("manifest.json", json.dumps([{"Config": "config.json", "RepoTags": [image_ref],
                                                          "Layers": [f.name for f, _ in files[:-1]]}]).encode()))
        _docker("load", stdin=_tar(list({f.name: (f, d) for f, d in files}.values())))
        refs.append(image_ref)
    return refs[0], refs[1], k


def invoke(*args: str) -> tuple[dict, str]:
    proc = subprocess.run(["invoke", *args, "--json"], cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"invoke {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout), proc.stderr


def timed_import(folder: Path) -> tuple[float, str]:
    """Seconds, and what the import said of the layers a delta disc lacks."""
    start = time.monotonic()
    _, said = invoke("import", "--from", str(folder), "--no-verify")
    line = next(iter(" ".join(said.split()).split(" delta disc: ")[1:]), "")
    return time.monotonic() - start, line.split(" by content")[0] + " by content" if line else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--layer", type=int, help="which of the image's layers the patch changes (0 = first)")
    parser.add_argument("--patch-bytes", type=int, default=1 << 20)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    prefix = f"rapidship-bench-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="rapidship-import-bench-") as tmp:
        out = Path(tmp)
        n, n1, k = make_pair(args.image, args.layer, args.patch_bytes, out, prefix)
        try:
            full_n, _ = invoke("export", "--image", n, "--unsigned", "--out", str(out / "n"), "--keep-dirs")
            full, _ = invoke("export", "--image", n1, "--unsigned", "--out", str(out / "n1"), "--keep-dirs")
            delta, _ = invoke("export", "--image", n1, "--unsigned", "--out", str(out / "d"), "--keep-dirs",
                           "--since", str(out / "n" / "export.json"))
            _docker("rmi", n1, n)
            t_full, _ = timed_import(out / "n1")
            _docker("rmi", n1)
            timed_import(out / "n")
            t_delta, how = timed_import(out / "d")
        finally:
            subprocess.run(["docker", "rmi", n1, n], capture_output=True, check=False)
    bytes_ratio = delta["archive_bytes"] / full["archive_bytes"]
    bound = t_full * 1.5 * bytes_ratio + 5
    figures = {"image": args.image, "patched_layer": k, "patch_bytes": args.patch_bytes,
               "full_archive_bytes": full["archive_bytes"], "delta_archive_bytes": delta["archive_bytes"],
               "base_archive_bytes": full_n["archive_bytes"], "full_import_s": round(t_full, 2),
               "delta_import_s": round(t_delta, 2), "delta_layers_from_host": how, "goal_s": round(bound, 2), "met": t_delta <= bound}
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
