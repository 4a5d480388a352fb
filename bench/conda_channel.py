"""A conda channel made of real bytes, where no conda channel can be reached: the RAPIDS pip lock's
own wheels, each turned into one `.conda` package, plus Python itself from Debian 12's python3.11
packages relocated under the prefix, indexed with py-rattler (docs/conda.md, "A channel made of
wheels"). Usage:

    python3 bench/conda_channel.py make --out CHANNEL [--lock locks/rapids-pip/requirements.txt]
                                        [--wheels DIR] [--debs DIR] [--work DIR]
    python3 bench/conda_channel.py lock CHANNEL [--require cudf-cu12 --require dask-cuda ...]
    python3 bench/conda_channel.py serve CHANNEL

`make` downloads what is missing (`pip download --no-deps --only-binary=:all: --require-hashes`
with the lock's hashes, `apt-get download` for the Debian packages), converts, indexes and prints
the seconds of each step. `lock` serves the channel on 127.0.0.1 and solves a conda env spec
against it with rapidship's own `lock_conda`. Package names stay the wheels' (canonical) names:
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
    machine = ARCHES[arch]
    platforms = [a for p in PIP_PLATFORMS for a in ("--platform", f"{p}_{machine}")]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
                    *platforms, "--python-version", PYTHON, "--implementation", "cp", "--abi", f"cp{PYTHON.replace('.', '')}",
                    "-r", str(req), "-d", str(wheels), "-q"], check=True)


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
    matrix = load_matrix(project / "variants.yaml")
    spec = load_env_spec("wheels", project / "envs")
    with serve(channel.parent) as (port, _):
        return lock_conda(spec, matrix, [f"http://127.0.0.1:{port}/{channel.name}"], project / "locks")[0]


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
