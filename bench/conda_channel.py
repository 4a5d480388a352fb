"""A conda channel made of real bytes, where no conda channel can be reached: the RAPIDS pip lock's
own wheels, each turned into one `.conda` package, plus Python itself from Debian 12's python3.11
packages relocated under the prefix, indexed with py-rattler (docs/conda.md, "A channel made of
wheels"). Usage:

    python3 bench/conda_channel.py make --out CHANNEL [--lock locks/rapids-pip/requirements.txt]
                                        [--wheels DIR] [--debs DIR] [--work DIR]
    python3 bench/conda_channel.py lock CHANNEL [--require cudf-cu12 --require dask-cuda ...]
    python3 bench/conda_channel.py serve CHANNEL
    python3 bench/conda_channel.py patch CHANNEL --pin numpy==2.4.4 --base PROJECT --project NEW

`make` downloads what is missing (`pip download --no-deps --only-binary=:all: --require-hashes`
with the lock's hashes, `apt-get download` for the Debian packages), converts, indexes and prints
the seconds of each step. `lock` serves the channel on 127.0.0.1 and solves a conda env spec
against it with rapidship's own `lock_conda`. `patch` makes a one-package patch, as a channel gets
one: that version's wheel from the index joins the channel, and NEW's lock is BASE's spec plus the
pin, solved again (it fails unless exactly that package's record changed). Package names stay the wheels' (canonical) names:
`cudf-cu12`, not conda-forge's `cudf`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.conda_package import ARCHES, PYTHON, ChannelError  # noqa: E402
from bench.debian_python import download_debs, python_packages  # noqa: E402
from bench.wheel_packages import convert_wheels  # noqa: E402
from rapidship.errors import RapidshipError  # noqa: E402

PIP_PLATFORMS = ("manylinux_2_28", "manylinux_2_27", "manylinux_2_24", "manylinux_2_17", "manylinux2014",
                 "manylinux2010", "manylinux1")


# ---- the channel ----

def index_channel(channel: Path) -> None:
    import asyncio

    from rattler.index import index_fs

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel, force=True))


def download_wheels(lock: Path, wheels: Path, arch: str = "amd64") -> None:
    from rapidship.lock.pip import for_arch

    wheels.mkdir(parents=True, exist_ok=True)
    req = wheels / f"requirements-{arch}.txt"
    req.write_text(for_arch(lock.read_text(), arch, PYTHON, str(lock)))
    subprocess.run([*_pip_download(arch), "--require-hashes", "-r", str(req), "-d", str(wheels)], check=True)


def _pip_download(arch: str) -> list[str]:
    platforms = [a for p in PIP_PLATFORMS for a in ("--platform", f"{p}_{ARCHES[arch]}")]
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", *platforms,
            "--python-version", PYTHON, "--implementation", "cp", "--abi", f"cp{PYTHON.replace('.', '')}"]


def make_channel(out: Path, wheels: list[Path], debs: Path, work: Path, arch: str = "amd64",
                 level: int = 3) -> dict[str, float]:
    """The whole channel in `out` (its name is the channel's): python and its libraries, every
    wheel, indexed; the seconds of each step."""
    channel = out
    seconds = {}
    start = time.monotonic()
    python_packages(debs, channel, work, arch, level)
    seconds["python"] = time.monotonic() - start
    start = time.monotonic()
    convert_wheels(wheels, channel, work, level, arch)
    seconds["wheels"] = time.monotonic() - start
    start = time.monotonic()
    index_channel(channel)
    seconds["index"] = time.monotonic() - start
    return seconds


# ---- lock a conda spec against it ----

VARIANTS = """
defaults:
  registry_prefix: harbor.example.internal/dockerhub
  budget_bytes: 4700000000
  uid: 1001
  user: rapids
  rapids: "26.10"
  python: "3.11"
  flavour: conda
  image: rapidship-bench/wheels
  env: {env}
  conda_builder: library/python:3.11-slim-bookworm
  gpu_archs: [80, 90]
oses:
  debian12:
    family: deb
    distro: debian
    version: "12"
    arches: [amd64]
    image: library/debian:bookworm-slim
axes:
  cuda: ["{cuda}"]
  os: [debian12]
"""


def env_spec(channel_name: str, requirements: list[str]) -> str:
    reqs = "".join(f"  - {r}\n" for r in requirements)
    return (f"flavour: conda\nchannels: [{channel_name}]\n"
            "pin: [python]     # the channel has python; no cuda-version package (the wheels carry CUDA)\n"
            f"requirements:\n{reqs}")


def lock_against(channel: Path, requirements: list[str], project: Path, cuda: str = "12.9") -> Path:
    """Serve the channel on 127.0.0.1 and lock the spec with rapidship's lock_conda; the lock file."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.channel_server import serve

    from rapidship.config.matrix import load_matrix
    from rapidship.lock.conda import lock_conda
    from rapidship.lock.pip import load_env_spec

    (project / "envs").mkdir(parents=True, exist_ok=True)
    (project / "variants.yaml").write_text(VARIANTS.format(env="wheels", cuda=cuda))
    (project / "envs/wheels.yaml").write_text(env_spec(channel.name, requirements))
    (project / "locks").mkdir(exist_ok=True)
    if not (project / "locks/tools.txt").is_file():  # the builder's own tools: the checkout's lock
        (project / "locks/tools.txt").write_bytes((ROOT / "locks/tools.txt").read_bytes())
    matrix = load_matrix(project / "variants.yaml")
    spec = load_env_spec("wheels", project / "envs")
    with serve(channel.parent) as (port, _):
        return lock_conda(spec, matrix, [f"http://127.0.0.1:{port}/{channel.name}"], project / "locks")[0]


def patch_lock(channel: Path, pin: str, base: Path, project: Path, work: Path) -> Path:
    """A one-package patch: the pinned version's wheel joins the channel (converted, re-indexed), and
    `project` is `base`'s spec plus the pin, locked. The channel's URL in the lock is `base`'s (the
    server's port changes per run; the builder fetches from the mirror it is given, by channel name)."""
    import re
    import shutil

    name, sep, version = pin.partition("==")
    if not sep or not version:
        raise ChannelError(f"--pin {pin!r}: give NAME==VERSION, a version the index has")
    [base_lock] = sorted(base.glob("locks/*/*/conda-*.lock"))
    records = {r["name"]: r for r in map(json.loads, (line for line in base_lock.read_text().splitlines()
                                                        if line.startswith("{")))}
    if name not in records:
        raise ChannelError(f"--pin {pin!r}: {base_lock} locks no package {name!r}")
    wheels = work / "wheels"
    subprocess.run([*_pip_download("amd64"), f"{name}=={version}", "-d", str(wheels)], check=True)
    for stale in [*channel.glob("*/repodata*"), *channel.glob("*/shards")]:
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    convert_wheels(sorted(wheels.glob("*.whl")), channel, work / "packages")
    index_channel(channel)
    (project / "locks").mkdir(parents=True, exist_ok=True)
    shutil.copy(base / "locks/tools.txt", project / "locks/tools.txt")
    spec = (base / "envs/wheels.yaml").read_text()
    requirements = [line.strip()[2:] for line in spec.splitlines() if line.startswith("  - ")]
    path = lock_against(channel, [r for r in requirements if not r.startswith(f"{name}==")] + [pin], project)
    served = re.search(r"http://127\.0\.0\.1:\d+/", path.read_text()).group(0)
    kept = re.search(r"http://127\.0\.0\.1:\d+/", base_lock.read_text()).group(0)
    path.write_text(path.read_text().replace(served, kept))
    new = {r["name"]: r for r in map(json.loads, (line for line in path.read_text().splitlines() if line.startswith("{")))}
    moved = sorted(n for n in records.keys() | new.keys() if records.get(n) != new.get(n))
    if moved != [name]:
        raise ChannelError(f"--pin {pin!r} moved {', '.join(moved) or 'nothing'} in {path}: a patch moves one package")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    make = sub.add_parser("make", help="download what is missing, convert, index")
    make.add_argument("--out", type=Path, required=True, help="the channel folder (its name is the channel's)")
    make.add_argument("--lock", type=Path, default=ROOT / "locks/rapids-pip/requirements.txt")
    make.add_argument("--wheels", type=Path, default=Path("build/conda-channel/wheels"))
    make.add_argument("--debs", type=Path, default=Path("build/conda-channel/debs"))
    make.add_argument("--work", type=Path, default=None)
    make.add_argument("--level", type=int, default=3, help="zstd level of the .conda members")
    lock = sub.add_parser("lock", help="serve the channel on 127.0.0.1 and lock a spec against it")
    lock.add_argument("channel", type=Path)
    lock.add_argument("--require", action="append", default=None)
    lock.add_argument("--project", type=Path, default=None)
    patch = sub.add_parser("patch", help="add one package's other version to the channel and lock a patch of --base")
    patch.add_argument("channel", type=Path)
    patch.add_argument("--pin", required=True, help="NAME==VERSION, a version the index has")
    patch.add_argument("--base", type=Path, required=True, help="the project whose lock is release N")
    patch.add_argument("--project", type=Path, required=True, help="the new project: release N+1's lock")
    serve_cmd = sub.add_parser("serve", help="serve the channel's parent folder on 127.0.0.1 until interrupted")
    serve_cmd.add_argument("channel", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "make":
            start = time.monotonic()
            download_wheels(args.lock, args.wheels)
            download_debs(args.debs)
            fetched = time.monotonic() - start
            wheels = sorted(args.wheels.glob("*.whl"))
            with tempfile.TemporaryDirectory(dir=args.work) as work:
                seconds = make_channel(args.out, wheels, args.debs, Path(work))
            packages = sorted(args.out.rglob("*.conda"))
            size = sum(p.stat().st_size for p in packages)
            print(json.dumps({"download_s": round(fetched, 1), **{f"{k}_s": round(v, 1) for k, v in seconds.items()},
                              "wheels": len(wheels), "wheel_bytes": sum(w.stat().st_size for w in wheels),
                              "packages": len(packages), "package_bytes": size}, indent=1))
        elif args.cmd == "lock":
            reqs = args.require or ["cudf-cu12", "dask-cudf-cu12", "dask-cuda", "cuml-cu12"]
            start = time.monotonic()
            with tempfile.TemporaryDirectory() as tmp:
                path = lock_against(args.channel.resolve(), reqs, args.project or Path(tmp))
                packages = next(line for line in path.read_text().splitlines() if line.startswith("# packages:"))
                print(f"{path if args.project else 'lock'}: {packages[2:]}, solved in {time.monotonic() - start:.1f} s")
        elif args.cmd == "patch":
            with tempfile.TemporaryDirectory() as work:
                print(patch_lock(args.channel.resolve(), args.pin, args.base.resolve(), args.project.resolve(), Path(work)))
        else:
            sys.path.insert(0, str(ROOT / "tests"))
            from support.channel_server import serve

            with serve(args.channel.resolve().parent) as (port, _):
                print(f"http://127.0.0.1:{port}/{args.channel.name}", flush=True)
                while True:
                    time.sleep(3600)
    except ChannelError as err:
        print(f"conda_channel: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        said = (err.stderr or b"").decode(errors="replace").strip()[-500:] if isinstance(err.stderr, bytes) else ""
        print(f"conda_channel: {' '.join(map(str, err.cmd[:4]))} ... failed (exit {err.returncode}) {said}".rstrip(),
              file=sys.stderr)
        return 2
    except RapidshipError as err:
        print(f"conda_channel: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
