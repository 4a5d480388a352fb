"""Release chain benchmark: each stage of `invoke release` against its floor, side by side in one run.

A stage's floor is the bytes it must read, hash, compress or write, at this machine's own rates
measured in the same run on the image's own bytes (its `docker save` stream): sha256 (hashlib),
zstd -3 -T0 compress and decompress, and a disk write with fsync. The chain runs in a scratch
project (the checkout linked in, its own build/ and a one-commit git repository, a loopback
registry from `invoke registry.up`, a throwaway key): the first release from a warm build cache,
then a delta release (--since the first disc) and, with --patch PACKAGE==VERSION, a patch release:
that package pinned to VERSION in a copy of the lock, rebuilt and shipped --since the first disc.
Usage (project root, engine up, the image built once so the build cache is warm):
python3 bench/release_chain.py [--variant cpu-debian12] [--arch amd64|arm64|all] [--patch toolz==1.1.0] [--json OUT]

A conda variant from the channel made of wheels (docs/conda.md): `--conda-channel CHANNEL --conda-project P`
(P from `bench/conda_channel.py lock CHANNEL --project P`) releases P's variant with P's variants.yaml,
envs and locks, the channel served on 127.0.0.1 and given to the build as its mirror (`--conda-channel
URL --network host`); `--patch NAME==VERSION` re-locks P's spec with that pin (`conda_channel.py patch`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = 512 << 20  # bytes of the image's save stream the rates are measured on (at most)
FLOORS = {  # stage -> what it must do with its bytes: (rate, bytes key) terms
    "build": [("sha256", "image"), ("zstd", "image")],        # hash every layer (normalise), the zstd size it records
    "gates": [("sha256", "image")],                          # read the image once, hash its files
    "scan": [("sha256", "image")],                           # read every layer once
    "push": [("sha256", "image"), ("write", "image")],        # hash every blob, the registry writes it
    "export": [("zstd", "tar"), ("write", "archive"), ("sha256", "archive")],
    # every layer it serves is hashed, from the disc or (a delta) from the host's engine
    "export-verify": [("sha256", "iso"), ("unzstd", "tar"), ("sha256", "image")],
}
TINY = 0.05  # s: a floor below this says the stage's time is fixed costs, not bytes (no ratio printed)


def sh(*cmd: str, cwd: Path | None = None, env: dict | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


OWN = ("variants.yaml", "envs", "locks")  # what a conda project brings in place of the checkout's


def project(work: Path, conda: Path | None = None) -> Path:
    folder = work / "project"
    folder.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "build", "tasks.py", ".gitignore") and not (conda and entry.name in OWN):
            (folder / entry.name).symlink_to(entry)
    for name in ("tasks.py", ".gitignore"):  # git reads no .gitignore through a link: build/ must stay ignored
        shutil.copy2(ROOT / name, folder / name)
    for name in OWN if conda else ():
        (shutil.copytree if (conda / name).is_dir() else shutil.copy2)(conda / name, folder / name)
    env = dict(os.environ, GIT_AUTHOR_DATE="2026-12-01T00:00:00+00:00", GIT_COMMITTER_DATE="2026-12-01T00:00:00+00:00")
    who = ["-c", "user.name=bench", "-c", "user.email=bench@rapidship.invalid"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release chain benchmark"]):
        sh("git", *who, *cmd, cwd=folder, env=env)
    return folder


def rates(image_ref: str, work: Path) -> dict[str, float]:
    """Bytes per second of sha256, zstd -3 -T0, zstd -d and a disk write (fsync), on the image's own bytes."""
    sample = work / "sample.tar"
    with open(sample, "wb") as out, subprocess.Popen(["docker", "save", image_ref], stdout=subprocess.PIPE) as save:
        left = SAMPLE
        while left and (chunk := save.stdout.read(min(1 << 20, left))):
            out.write(chunk)
            left -= len(chunk)
        save.kill()
    data = sample.read_bytes()
    got = {}
    start = time.monotonic()
    hashlib.sha256(data).hexdigest()
    got["sha256"] = len(data) / (time.monotonic() - start)
    start = time.monotonic()
    packed = subprocess.run(["zstd", "-3", "-T0", "-q", "-c"], input=data, capture_output=True, check=True).stdout
    got["zstd"] = len(data) / (time.monotonic() - start)
    start = time.monotonic()
    subprocess.run(["zstd", "-d", "-q", "-c"], input=packed, stdout=subprocess.DEVNULL, check=True)
    got["unzstd"] = len(data) / (time.monotonic() - start)
    target = work / "write-test"
    start = time.monotonic()
    with open(target, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    got["write"] = len(data) / (time.monotonic() - start)
    target.unlink()
    sample.unlink()
    start = time.monotonic()  # not a floor: the engine's own rate, for what holds the stages that go through it
    saved = subprocess.run(f"docker save {image_ref} | wc -c", shell=True, capture_output=True, text=True, check=True)
    got["docker save"] = int(saved.stdout.strip()) / (time.monotonic() - start)
    return got


def floors(record: dict, sizes: dict[str, int], rate: dict[str, float]) -> list[tuple]:
    rows = []
    for stage in record["stages"]:
        name, seconds = stage["name"], stage["seconds"]
        terms = FLOORS.get(name)
        if stage["verdict"] != "pass":
            rows.append((name, stage["verdict"], seconds, None, None, ""))
            continue
        if not terms:
            rows.append((name, "pass", seconds, None, None, "records only: no floor"))
            continue
        floor = sum(sizes[key] / rate[kind] for kind, key in terms)
        what = " + ".join(f"{sizes[key] / 1e6:,.1f} MB {kind}" for kind, key in terms)
        rows.append((name, "pass", seconds, floor, seconds / floor if floor >= TINY else None,
                     what + (" (fixed costs, not bytes)" if floor < TINY else "")))
    return rows


def show(title: str, rows: list[tuple], total: float) -> None:
    print(f"\n{title} (chain {total:.1f} s)")
    print(f"{'stage':14} {'verdict':8} {'seconds':>8} {'floor':>8} {'ratio':>7}  floor counts")
    for name, verdict, seconds, floor, ratio, what in rows:
        f = f"{floor:8.2f}" if floor is not None else f"{'-':>8}"
        r = f"{ratio:6.1f}x" if ratio is not None else f"{'-':>7}"
        print(f"{name:14} {verdict:8} {seconds:8.1f} {f} {r}  {what}")


def stage_record(release: dict, name: str) -> str:
    """The record a stage of the chain's record names (by name: the chain's stages grow)."""
    return next(stage["record"] for stage in release["stages"] if stage["name"] == name)


def commit_patch(folder: Path, pin: str, env: dict) -> None:
    who = ["-c", "user.name=bench", "-c", "user.email=bench@rapidship.invalid"]
    for cmd in (["add", "-A", "--", "locks", "envs"], ["commit", "-q", "-m", f"patch: {pin}"]):
        sh("git", *who, *cmd, cwd=folder, env=dict(env, GIT_AUTHOR_DATE="2026-12-02T00:00:00+00:00",
                                                   GIT_COMMITTER_DATE="2026-12-02T00:00:00+00:00"))


def patch_conda(folder: Path, channel: Path, pin: str, env: dict, work: Path) -> None:
    """The conda project's spec with PACKAGE pinned to VERSION, locked against the channel (the
    version's wheel made a package of it first), committed: the solve must move that package alone."""
    sh(sys.executable, str(ROOT / "bench/conda_channel.py"), "patch", str(channel), "--pin", pin, "--base", str(folder),
       "--project", str(work / "patched"), cwd=ROOT, env=env)
    for name in ("locks", "envs"):  # the spec carries the pin: the lock must match it
        shutil.rmtree(folder / name)
        shutil.copytree(work / "patched" / name, folder / name)
    commit_patch(folder, pin, env)


def patch(folder: Path, variant: str, pin: str, env: dict) -> None:
    """The variant's lock in the scratch project (a copy, not the checkout's) with PACKAGE pinned to
    VERSION and that version's hashes from the index, its wheel sizes remade, committed."""
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "src"))
    from patch_layers import index_hashes, pinned

    from rapidship.config.matrix import load_matrix

    package, _, version = pin.partition("==")
    lock_env = load_matrix(folder / "variants.yaml").get(variant).env
    (folder / "locks").unlink()
    shutil.copytree(ROOT / "locks", folder / "locks")
    lock = folder / "locks" / lock_env / "requirements.txt"
    lock.write_text(pinned(lock.read_text(), package, version, index_hashes(package, version)))
    sh("invoke", "lock-sizes", "--env", lock_env, cwd=folder, env=env)
    commit_patch(folder, pin, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="cpu-debian12")
    parser.add_argument("--arch", default="amd64", help="amd64, arm64 or all (both on one disc; image bytes summed)")
    parser.add_argument("--json", help="also write the figures here (the record docs/measurements/benchmarks.md quotes)")
    parser.add_argument("--note", default="", help="what else ran on the machine meanwhile (kept in the record)")
    parser.add_argument("--patch", help="PACKAGE==VERSION: a third release, a patch release --since the full one, "
                                        "with that package of the variant's lock pinned to VERSION (from the index)")
    parser.add_argument("--reproduce", action="store_true", help="after the full release, `invoke reproduce` its "
                        "image (a rebuild without cache from the recorded inputs: the same image id?)")
    parser.add_argument("--delta-cost", action="store_true", help="after the full release, `invoke size-report "
                        "--delta-cost` of its image: the table and the year's re-feed, kept in the record")
    parser.add_argument("--keep", action="store_true", help="leave the full and the patch release's images in the "
                        "engine, tagged ...:n-RUN and ...:n1-RUN (for bench/delta_disc.py --import)")
    parser.add_argument("--conda-channel", type=Path, help="the channel made of wheels (bench/conda_channel.py make)")
    parser.add_argument("--conda-project", type=Path, help="its locked project (bench/conda_channel.py lock)")
    args = parser.parse_args()
    if bool(args.conda_channel) != bool(args.conda_project):
        raise SystemExit("--conda-channel and --conda-project go together")
    arches = ["amd64", "arm64"] if args.arch == "all" else [args.arch]
    work = Path(tempfile.mkdtemp(prefix="release-bench-"))
    folder = project(work, args.conda_project and args.conda_project.resolve())
    served = contextlib.ExitStack()
    mirror = ()
    if args.conda_channel:
        sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]
        from support.channel_server import serve

        from rapidship.config.matrix import load_matrix

        [args.variant] = load_matrix(folder / "variants.yaml").variants
        port, _ = served.enter_context(serve(args.conda_channel.resolve().parent))
        mirror = ("--conda-channel", f"http://127.0.0.1:{port}/{args.conda_channel.name}", "--network", "host")
    run_id = f"bench{os.getpid()}"
    env = dict(os.environ, RAPIDSHIP_RUN_ID=run_id, RAPIDSHIP_SIGNING_PASSWORD="bench-only", TMPDIR=str(work),
               DOCKER_CONFIG=str(work / "docker-config"))
    env.pop("RAPIDSHIP_SIGNING_KEY", None)
    (work / "docker-config").mkdir()
    invoke = lambda *a: sh("invoke", *a, cwd=folder, env=env)  # noqa: E731
    invoke("registry.up", "--dir", "build/registry")
    try:
        for line in (folder / "build/registry/env.sh").read_text().splitlines():
            if line.startswith("export "):
                key, value = line[len("export "):].split("=", 1)
                env[key] = value.strip("'\"")
        invoke("keys.generate", "--out", "keys")
        invoke("trivy-db", "--advisories", "docs/examples/quickstart-advisories.yaml", "--cache-dir", "cache")
        chain = ("release", "--variant", args.variant, "--arch", args.arch, "--key", "keys/cosign.key",
                 "--cache-dir", "cache", "--skip-db-update", "--offline-scan", *mirror)
        records, reproduced, costs = {}, {}, {}
        for name in ("full", "delta", "patch") if args.patch else ("full", "delta"):
            extra = () if name == "full" else ("--since", str(folder / stage_record(records["full"], "export")))
            if name == "patch" and args.conda_channel:
                patch_conda(folder, args.conda_channel.resolve(), args.patch, env, work)
            elif name == "patch":
                patch(folder, args.variant, args.patch, env)
            start = time.monotonic()
            invoke(*chain, *extra)
            records[name] = json.loads((folder / "build" / args.variant / "release.json").read_text())
            records[name]["wall"] = time.monotonic() - start
            records[name]["built"] = [json.loads((folder / "build" / args.variant / f"build-{a}.json").read_text())
                                      for a in arches]
            if args.keep and name in ("full", "patch"):
                for b in records[name]["built"]:
                    kept = f"{b['ref'].rsplit(':', 1)[0]}:{'n' if name == 'full' else 'n1'}-{b['arch']}-{run_id}"
                    sh("docker", "tag", b["image_id"], kept)
                    print(f"kept {kept}")
            if name == "full" and args.delta_cost:
                for a in arches:
                    rep = json.loads(subprocess.run(  # exit 1 above the goal: the record says so
                        ["invoke", "size-report", "--variant", args.variant, "--arch", a, "--delta-cost", "--json"],
                        cwd=folder, env=env, capture_output=True, text=True).stdout)
                    costs[a] = {k: rep["delta_cost"][k] for k in ("goal", "distributions", "misses", "worst", "rows",
                                                                  "per_year") if k in rep["delta_cost"]}
                    print(f"delta cost {a}: {costs[a]['misses']} of {costs[a]['distributions']} above the goal")
            if name == "full" and args.reproduce:
                for a in arches:
                    ran = subprocess.run(["invoke", "reproduce", "--variant", args.variant, "--arch", a, "--digest",
                                          records[name]["built"][arches.index(a)]["image_id"], *mirror],
                                         cwd=folder, env=env, capture_output=True, text=True)
                    made = folder / "build" / args.variant / f"reproduce-{a}.json"
                    # a miss is recorded by reproduce itself; an error before it rebuilt, here
                    reproduced[a] = json.loads(made.read_text()) if made.is_file() else {
                        "reproduced": False, "seconds": None, "exit": ran.returncode, "said": ran.stderr[-2000:]}
                    print(f"reproduce {a}: {'same image id' if reproduced[a]['reproduced'] else 'DIFFERENT'} "
                          f"({reproduced[a]['seconds']} s)")
        rate = rates(records["full"]["built"][0]["image_id"], work)
        print("this machine, measured now on the image's own bytes: " +
              ", ".join(f"{k} {v / 1e6:,.0f} MB/s" for k, v in rate.items()))
        figures = {"variant": args.variant, "arch": args.arch, "image_id": records["full"]["built"][0]["image_id"],
                   **({"image_ids": {b["arch"]: b["image_id"] for b in records["full"]["built"]}} if len(arches) > 1 else {}),
                   **({"flavour": "conda, from the channel made of wheels (bench/conda_channel.py)"}
                      if args.conda_channel else {}),
                   "patch": args.patch, "note": args.note, **({"reproduced": reproduced} if reproduced else {}),
                   **({"delta_cost": costs} if costs else {}),
                   "rates_bytes_per_s": {k: round(v) for k, v in rate.items()}, "releases": {}}
        for name, record in records.items():
            disc = json.loads((folder / stage_record(record, "export")).read_text())
            sizes = {"image": sum(b["size_bytes"] for b in record["built"]), "tar": disc["tar_bytes"],
                     "archive": disc["archive_bytes"],
                     "iso": sum(v["iso_bytes"] for v in disc["volumes"])}
            rows = floors(record, sizes, rate)
            show(f"{name} release of {args.variant} {args.arch}: image {sizes['image'] / 1e6:,.0f} MB, disc archive "
                 f"{sizes['archive'] / 1e6:,.1f} MB", rows, record["wall"])
            built_now = record["stages"][0]["verdict"] == "pass"  # skipped: the record is the earlier build's
            normalised = {b["arch"]: b["extra"].get("normalised", {}) for b in record["built"]} if built_now else {}
            print("normaliser: " + ("; ".join(f"{a} {n.get('layers_rewritten')} layers written, {n.get('layers_reused', 0)} "
                                             f"left to the engine, {n.get('seconds')} s" for a, n in normalised.items())
                                    or "did not run (the build was current)"))
            figures["releases"][name] = {"chain_s": round(record["wall"], 1), "sizes": sizes, "normalised": normalised,
                                         "layers": {b["arch"]: b["layers"] for b in record["built"]},
                                         "steps_cached": {b["arch"]: f"{b['cached_steps']}/{b['total_steps']}"
                                                          for b in record["built"]} if built_now else {},
                                         "stages": [
                {"stage": n, "verdict": v, "seconds": s, "floor_s": None if f is None else round(f, 2),
                 "ratio": None if r is None else round(r, 1), "floor_counts": w} for n, v, s, f, r, w in rows]}
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        served.close()
        subprocess.run(["invoke", "registry.down", "--dir", "build/registry"], cwd=folder, env=env, capture_output=True)
        refs = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                              text=True).stdout.split()
        mine = [r for r in refs if r.endswith(f"-{run_id}") and not (args.keep and (":n-" in r or ":n1-" in r))]
        if mine:
            subprocess.run(["docker", "rmi", *mine], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
