"""Which GPUs the locked wheels carry device code for, so a `gpu_archs` GPU they cannot run on is
refused at render time, before a build (the pruner would refuse the same file hours later).

The coverage of a lock is read once from a built image's prune record (`invoke device-code`): every
file with device code and the code it shipped before pruning (`sm_90`, `sm_90a`, `ptx_120`), kept
beside the lock as `locks/<env>/device-code-<arch>.json` with the sha256 of the per-arch lock it
describes. Render trusts it only for that lock: a coverage of another lock is not used (the build's
own refusal is then the check), and it never says more than the prune record said.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from rapidship.errors import ConfigError
from rapidship.runtime.cuda_rule import code_runs_on

FORMAT = 1
_CODE = re.compile(r"^(sm|ptx)_(\d+)([af]?)$")


def coverage_path(locks: Path, env: str, arch: str) -> Path:
    return locks / env / f"device-code-{arch}.json"


def from_prune_record(record: dict, env: str, arch: str, lock_bytes: bytes) -> dict:
    """Pure: a prune record -> the coverage document of the lock it was built from."""
    files = {f["path"]: sorted(f["arch_before"]) for f in record.get("files") or []
             if isinstance(f, dict) and f.get("arch_before")}
    if not files:
        raise ConfigError("prune record", "lists no file with device code",
                          "build a CUDA variant with gpu_archs set (its image carries /opt/rapidship/prune.json)")
    return {"format": FORMAT, "env": env, "arch": arch, "lock_sha256": hashlib.sha256(lock_bytes).hexdigest(),
            "files": files}


def runs_on(codes: list[str], gpu: int) -> bool:
    """Pure: does any of a file's device code (`sm_90a`, `ptx_120`) run on a GPU of capability `gpu`?"""
    for code in codes:
        m = _CODE.match(code)
        if m and code_runs_on(int(m.group(2)), gpu, ptx=m.group(1) == "ptx", specific=m.group(3) == "a"):
            return True
    return False


def uncovered(coverage: dict, gpus: tuple[int, ...]) -> list[tuple[int, str]]:
    """Pure: (gpu, file) for every listed GPU some file of the lock carries no code for."""
    return [(gpu, path) for gpu in gpus for path, codes in sorted(coverage["files"].items()) if not runs_on(codes, gpu)]


def check(variant, arch: str, lock_bytes: bytes | None, locks: Path) -> str:
    """ConfigError when the committed coverage of this arch's lock says a listed GPU has no code in
    some file; otherwise what was checked (for the render record), or why nothing could be."""
    gpus = variant.gpu_archs_for(arch)
    path = coverage_path(locks, variant.env, arch)
    if not gpus or lock_bytes is None:
        return "nothing to check"
    if not path.is_file():
        return f"no coverage for this lock ({path}): the build's pruner checks it"
    try:
        coverage = json.loads(path.read_text())
        files = coverage["files"]
        stated = coverage["lock_sha256"]
    except (ValueError, KeyError, TypeError):
        raise ConfigError(str(path), "is not a device-code coverage document",
                          f"make it again: invoke device-code --variant {variant.id} --arch {arch}") from None
    if stated != hashlib.sha256(lock_bytes).hexdigest() or not isinstance(files, dict):
        return f"{path} describes another lock: the build's pruner checks it"
    misses = uncovered(coverage, gpus)
    if misses:
        gpu, first = misses[0]
        count = sum(1 for g, _ in misses if g == gpu)
        raise ConfigError(f"variants.yaml: gpu_archs of {variant.id} ({arch})",
                          f"sm_{gpu} has no device code in {count} of the {len(files)} libraries with device code "
                          f"that the {variant.env} lock installs for {arch} (e.g. {first}: {', '.join(files[first])})",
                          f"drop {gpu} from gpu_archs, or lock wheels built for it (coverage: {path})")
    return f"every listed GPU ({', '.join(map(str, gpus))}) has code in all {len(files)} libraries ({path})"
