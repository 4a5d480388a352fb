"""Thin I/O around the pure pruner: files, folders and wheels in, pruned files and one record out.

Runs in the builder stage (stdlib only: this package is copied into the build context) and on the
host as `invoke prune`. Every rewritten file is proven (core.prove) and, when NVIDIA's cuobjdump
is at hand, listed by it as holding exactly the kept device code; a file that fails either check
is left as it was and the record says why. Replacement is atomic (temp file + rename), keeps the
mode, and never writes through a hard link (conda envs link files from their package cache).
"""

from __future__ import annotations

import base64
import hashlib
import mmap
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from . import census, core, inplace
from . import elf as E
from . import fatbin as F

SCHEMA_VERSION = 1
RECORD_NAME = "prune.json"


def candidates(root: Path):
    """Regular ELF files under root (or root itself); symlinks are left to their targets."""
    if root.is_file() and not root.is_symlink():
        if _is_elf(root):
            yield root
        return
    for dirpath, _dirs, names in os.walk(root):
        for name in sorted(names):
            path = Path(dirpath) / name
            if not path.is_symlink() and path.is_file() and _is_elf(path):
                yield path


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return E.is_elf(f.read(4))
    except OSError:
        return False


def prune_file(path: Path, keep: tuple[int, ...], dest: Path | None = None,
               cuobjdump: str | None = None) -> dict:
    """Prune one ELF file (in place, or into dest). Returns its entry for the record."""
    started = time.monotonic()
    size = path.stat().st_size
    entry = {"path": str(path), "status": "unchanged", "reason": "", "bytes_before": size, "bytes_after": size}
    if size == 0:
        return entry | {"reason": "empty file"}
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            form, plan, has_code = _plan(data, keep)
        except E.ElfError as err:
            return _copied(path, dest, entry | {"reason": f"not prunable ELF: {err}"})
        except core.Refused as err:
            return _copied(path, dest, entry | {"status": "refused", "reason": str(err)})
        if plan is None:
            reason = "device code too small to shrink" if has_code else "no device code"
            return _copied(path, dest, entry | {"reason": reason, "device_code": has_code})
        target = dest or path
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp, new_size, problems = _rewrite(data, form, plan, keep, target, cuobjdump)
        if problems:
            return _copied(path, dest, entry | {"status": "refused", "reason": "; ".join(problems[:3])})
    passes = [("", plan)]   # (the section a later pass read, its plan)
    try:
        if form is core:   # then NCCL's relocatable fatbins, and a kernel store beside .nv_fatbin (cuBLASLt)
            for later in (_second_pass, _data_pass):
                with open(tmp, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    got = later(data, keep, target, cuobjdump)
                if isinstance(got, str):
                    plan.notes.append(got)
                elif got:
                    os.replace(got[0], tmp)
                    new_size = got[1]
                    passes.append((got[3], got[2]))
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return entry | {
        "status": "pruned", "bytes_after": new_size,
        "layout": "; ".join(f"{where}: {p.layout}" if where else p.layout for where, p in passes),
        "containers": sum(p.containers for _, p in passes),
        "containers_without_fleet_code": sum(p.thinned_to_one if isinstance(p, core.Plan) else p.without_fleet_code
                                             for _, p in passes),
        **({"containers_zeroed": zeroed} if (zeroed := sum(len(p.dropped) for _, p in passes
                                                           if isinstance(p, inplace.Plan))) else {}),
        "arch_before": _summed(p.arch_before for _, p in passes), "arch_after": _summed(p.arch_after for _, p in passes),
        "notes": [n for _, p in passes for n in p.notes],
        "verified_by": ["rapidship-prove"] + (["cuobjdump"] if cuobjdump else []),
        "seconds": round(time.monotonic() - started, 3)}


def _rewrite(data, form, plan, keep: tuple[int, ...], target: Path, cuobjdump: str | None,
             name: str = core.FATBIN) -> tuple[Path, int, list[str]]:
    """Write the plan into a temp file beside target, prove it and have cuobjdump list it; the temp
    file is gone again when anything is wrong."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".prune", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w+b") as out:
            new_size = form.write(data, plan, out)
            out.flush()
            with mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ) as new:
                problems = form.prove(data, new, keep) if form is inplace else core.prove(data, new, keep, name)
                if not problems and cuobjdump and name != core.FATBIN:  # cuobjdump reads .nv_fatbin only
                    layout = core.read_layout(new, name)
                    problems = _cuobjdump_on_copies(cuobjdump, new, [inplace.Held(layout.section, c) for c in
                                                                     layout.containers], target.parent, "than kept")
        if not problems and cuobjdump and name == core.FATBIN:
            problems = _cuobjdump_disagrees(cuobjdump, tmp, plan) if form is core else \
                _cuobjdump_on_copies(cuobjdump, data, plan.dropped, target.parent, "than zeroed")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if problems:
        tmp.unlink()
    return tmp, new_size, problems


def _second_pass(data, keep: tuple[int, ...], target: Path, cuobjdump: str | None):
    """(temp file, size, plan, section) for __nv_relfatbin pruned after .nv_fatbin; None when there is no
    such section or nothing to save; a note saying why it stays whole when it is refused (the first
    pass stands alone then)."""
    if E.parse(data).section(core.RELFATBIN) is None:
        return None
    try:
        plan = core.plan_file(data, keep, core.RELFATBIN)
    except (core.Refused, E.ElfError) as err:
        return f"{core.RELFATBIN} left whole: {err}"
    if plan is None:
        return None
    tmp, size, problems = _rewrite(data, core, plan, keep, target, cuobjdump, core.RELFATBIN)
    return f"{core.RELFATBIN} left whole: {'; '.join(problems[:2])}" if problems else (tmp, size, plan, core.RELFATBIN)


def _data_pass(data, keep: tuple[int, ...], target: Path, cuobjdump: str | None):
    """(temp file, size, plan, sections) for containers a library keeps in its own data beside `.nv_fatbin`
    (cuBLASLt's kernel store `.cask_resource`), after the wrappers' pass: those no listed GPU runs
    are zero-filled where they lie (inplace), every other byte stays at its address. None when there
    are none worth a cut; a note saying why they stay when refused (the earlier passes stand)."""
    elf = E.parse(data)
    held = inplace.find(elf, data)
    if not held:
        return None
    where = ", ".join(sorted({h.section.name for h in held}))
    try:
        plan = inplace.plan_file(data, keep, held, served=keep)   # the wrappers' pass proved code for each
    except (core.Refused, E.ElfError) as err:
        return f"containers in {where} left whole: {err}"
    if plan is None:
        return None
    tmp, size, problems = _rewrite(data, inplace, plan, keep, target, cuobjdump)
    if problems:
        return f"containers in {where} left whole: {'; '.join(problems[:2])}"
    return tmp, size, plan, ", ".join(sorted({h.section.name for h in plan.dropped}))


def _summed(dicts) -> dict[str, int]:
    out: Counter = Counter()
    for d in dicts:
        out.update(d)
    return dict(sorted(out.items(), key=lambda kv: F._label_key(kv[0])))


def _plan(data, keep: tuple[int, ...]):
    """(form, plan, has device code): wrappers re-pointed (core), or, for a library that loads its
    containers itself (no wrappers, or no `.nv_fatbin` at all), no-fleet containers zero-filled
    where they lie (inplace). Each file's data sections are scanned for containers once at most."""
    refusal = None
    try:
        plan = core.plan_file(data, keep)
    except core.NoWrappers as err:
        refusal = err
    else:
        if plan is not None:
            return core, plan, True
        elf = E.parse(data)  # headers only: plan_file parsed them fine
        fatbin = elf.section(core.FATBIN)
        if fatbin is not None:   # nothing to drop there; a kernel store beside it may still hold some
            held = inplace.find(elf, data)
            stored = inplace.plan_file(data, keep, held, served=keep) if held else None
            return (inplace, stored, True) if stored else (core, None, fatbin.size > 0 or bool(held))
    elf = E.parse(data)
    held = inplace.find(elf, data)
    plan = inplace.plan_file(data, keep, held) if held else None
    if plan is None and refusal is not None:
        raise refusal
    return (inplace, plan, True) if plan is not None else (core, None, bool(held))


def _copied(path: Path, dest: Path | None, entry: dict) -> dict:
    if dest is not None and dest != path:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    return entry


_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+:\s+\S+\.(sm_\d+[a-z]?)\.(?:cubin|ptx)\s*$")


def _cuobjdump_disagrees(cuobjdump: str, path: Path, plan: core.Plan) -> list[str]:
    """NVIDIA's own reader must list exactly the entries the plan kept (labels and counts)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        layout = core.read_layout(data)
    return _listing_differs(cuobjdump, path, layout.containers, "than kept")


def _cuobjdump_on_copies(cuobjdump: str, data, held: list[inplace.Held], where: Path, what: str) -> list[str]:
    """cuobjdump reads only `.nv_fatbin`, so containers kept elsewhere (zeroed in place, or NCCL's
    relocatable ones) are copied into one of a throwaway ELF: NVIDIA's reader must list in them
    exactly what the pruner says they hold."""
    fd, name = tempfile.mkstemp(prefix=".listing.", suffix=".so", dir=where)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(inplace.listing_elf(data, held, E.parse(data).machine))
        return _listing_differs(cuobjdump, Path(name), [h.container for h in held], what)
    finally:
        os.unlink(name)


def _listing_differs(cuobjdump: str, path: Path, containers: list[F.Container], what: str) -> list[str]:
    seen: Counter = Counter()
    for flag in ("--list-elf", "--list-ptx"):
        run = subprocess.run([cuobjdump, flag, str(path)], capture_output=True, text=True, check=False)
        if run.returncode != 0:
            return [f"cuobjdump {flag} failed: {run.stderr.strip()[:200]}"]
        for line in run.stdout.splitlines():
            m = _LISTED.match(line.strip())
            if m:
                seen[("sm" if m.group(1) == "ELF" else "ptx", m.group(2))] += 1
            elif line.strip():
                return [f"cuobjdump printed an unknown line: {line.strip()[:120]}"]
    expected: Counter = Counter()
    for c in containers:
        for e in c.entries:
            if e.kind == F.KIND_LTOIR:   # cuobjdump lists cubins and PTX only; the proof reads these bytes
                continue
            name = f"sm_{e.arch}{'a' if e.specific else ''}"
            expected[("sm" if e.kind == F.KIND_CUBIN else "ptx", name)] += 1
    if seen != expected:
        diff = (seen - expected) + (expected - seen)
        return [f"cuobjdump lists other device code {what}: {dict(diff)}"]
    return []


def _job(args):
    """One file, for the process pool; `name` is how the record shows it (relative to its root)."""
    path, keep, dest, cuobjdump, name = args
    try:
        entry = prune_file(path, keep, dest, cuobjdump)
    except OSError as err:
        size = path.stat().st_size if path.exists() else 0
        entry = {"status": "refused", "reason": f"cannot read or write: {err.strerror or err}",
                 "bytes_before": size, "bytes_after": size}
    return entry | {"path": name}


def prune_paths(roots: list[Path], keep: tuple[int, ...], out: Path | None = None, cuobjdump: str | None = None,
                jobs: int = 1, on_file=None) -> dict:
    """Prune every ELF file under roots (wheels are rebuilt as wheels); the record of it all."""
    started = time.monotonic()
    work, wheels = [], []
    for root in roots:
        if root.suffix == ".whl" and root.is_file():
            wheels.append(root)
            continue
        for path in candidates(root):
            rel = path.relative_to(root) if root.is_dir() else Path(path.name)
            dest = None if out is None else out / (root.name if root.is_dir() else "") / rel
            work.append((path, keep, dest, cuobjdump, str(rel)))
    work.sort(key=lambda w: -w[0].stat().st_size)  # largest first: the pool finishes evenly
    entries = []
    if jobs > 1 and len(work) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for entry in pool.map(_job, work):
                entries.append(entry)
                on_file and on_file(entry)
    else:
        for item in work:
            entries.append(_job(item))
            on_file and on_file(entries[-1])
    wheel_entries = [prune_wheel(w, keep, out, cuobjdump, on_file) for w in wheels]
    for w in wheel_entries:
        entries.extend(w.pop("files"))
    result = record(keep, entries, time.monotonic() - started, wheel_entries)
    if work:   # what is left after pruning, wherever it lies (a wheel's files are counted inside the wheel's own run)
        by_name = {e["path"]: e for e in entries}
        result["census"] = census.census([(dest or path, name) for path, _k, dest, _c, name in work], keep, by_name)
    return result


def record(keep: tuple[int, ...], entries: list[dict], seconds: float, wheels: list[dict] | None = None) -> dict:
    """The prune record: per file and in total, bytes and device code by architecture."""
    entries = sorted(entries, key=lambda e: e["path"])
    arch_before: Counter = Counter()
    arch_after: Counter = Counter()
    for e in entries:
        arch_before.update(e.get("arch_before", {}))
        arch_after.update(e.get("arch_after", {}))
    with_code = [e for e in entries if e["status"] != "unchanged" or e.get("device_code")]
    before = sum(e["bytes_before"] for e in entries)
    after = sum(e["bytes_after"] for e in entries)
    return {
        "schema_version": SCHEMA_VERSION,
        "keep": list(keep),
        "totals": {
            "elf_files": len(entries), "with_device_code": len(with_code),
            "pruned": sum(e["status"] == "pruned" for e in entries),
            "refused": sum(e["status"] == "refused" for e in entries),
            "bytes_before": before, "bytes_after": after, "saved_bytes": before - after,
            "arch_before": dict(sorted(arch_before.items())), "arch_after": dict(sorted(arch_after.items())),
            "seconds": round(seconds, 2),
        },
        "wheels": wheels or [],
        "files": [e for e in entries if e["status"] != "unchanged" or e.get("device_code")],
    }


def prune_wheel(wheel: Path, keep: tuple[int, ...], out: Path | None, cuobjdump: str | None, on_file=None) -> dict:
    """A wheel comes back as a wheel: its ELF files pruned, RECORD rewritten with their new sha256
    and sizes, every other member byte-identical. Written to out (or over the original)."""
    target = (out / wheel.name) if out else wheel
    with tempfile.TemporaryDirectory(prefix="rapidship-prune-") as tmp:
        unpacked = Path(tmp) / "w"
        with zipfile.ZipFile(wheel) as zin:
            members = zin.infolist()
            zin.extractall(unpacked)
        entries = []
        for path in candidates(unpacked):
            entry = _job((path, keep, None, cuobjdump, f"{wheel.name}!{path.relative_to(unpacked)}"))
            entries.append(entry)
            on_file and on_file(entry)
        changed = {e["path"].split("!", 1)[1] for e in entries if e["status"] == "pruned"}
        target.parent.mkdir(parents=True, exist_ok=True)
        if not changed:   # nothing pruned: the wheel as it came (re-zipping alone changed its bytes)
            if target != wheel:
                shutil.copyfile(wheel, target)
            return {"wheel": str(target), "bytes_before": wheel.stat().st_size if target != wheel else None,
                    "bytes_after": target.stat().st_size, "pruned_members": [], "files": entries}
        fd, tmp_wheel = tempfile.mkstemp(prefix=f".{wheel.name}.", suffix=".prune", dir=target.parent)
        os.close(fd)
        try:
            _rezip(members, unpacked, changed, Path(tmp_wheel))
            os.chmod(tmp_wheel, 0o644)  # mkstemp makes 0600; a wheel is a plain readable file
            os.replace(tmp_wheel, target)
        except BaseException:
            Path(tmp_wheel).unlink(missing_ok=True)
            raise
    return {"wheel": str(target), "bytes_before": wheel.stat().st_size if target != wheel else None,
            "bytes_after": target.stat().st_size, "pruned_members": sorted(changed), "files": entries}


def _rezip(members: list[zipfile.ZipInfo], root: Path, changed: set[str], dest: Path) -> None:
    records = [m.filename for m in members if m.filename.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        raise core.Refused(f"the wheel has {len(records)} RECORD files")
    record_name = records[0]
    lines = (root / record_name).read_text().splitlines()
    fixed = []
    for line in lines:
        name = line.split(",", 1)[0]
        if name in changed:
            data = (root / name).read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            line = f"{name},sha256={digest},{len(data)}"
        fixed.append(line)
    missing = changed - {line.split(",", 1)[0] for line in lines}
    if missing:
        raise core.Refused(f"pruned files missing from RECORD: {sorted(missing)[:3]}")
    (root / record_name).write_text("\n".join(fixed) + "\n")
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for m in members:
            info = zipfile.ZipInfo(m.filename, date_time=m.date_time)
            info.external_attr, info.compress_type = m.external_attr, m.compress_type
            if m.is_dir():
                zout.writestr(info, b"")
                continue
            with open(root / m.filename, "rb") as src, zout.open(info, "w", force_zip64=True) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
