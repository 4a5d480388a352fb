"""Run the in-image spill smoke program with the hardened run profile and judge its report.

Pure core: `plan_smoke` (flags -> SmokePlan) and `run_argv` (plan -> `docker run` argv), and
`judge_run` (exit status, OOM flag, report -> SmokeResult). Thin edge: `smoke` makes the host
spill directory (0700, owned by the run uid), runs the container, reads its JSON and writes
build/smoke/<variant>-<arch>-<mode>-uid<uid>.json.

The profile: --memory equal to --memory-swap (no swap to hide in), --shm-size, a non-root
--user (1001 or a random uid, group 0), --read-only with a small tmpfs /tmp, the spill dir
bind-mounted from the host, no-new-privileges, --cap-drop ALL, --ulimit memlock=-1, and
`--gpus` with compute,utility capabilities when GPUs are asked for.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rapidship.engine import ENGINE
from rapidship.config.matrix import run_id
from rapidship.errors import ConfigError, GateFailure, RapidshipError
from rapidship.records import Workspace, save

SPILL_IN_CONTAINER = "/spill"
OOM_EXIT = 137
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kmg]?)b?$", re.I)


@dataclass(frozen=True)
class SmokePlan:
    variant: str
    arch: str
    ref: str
    mode: str
    uid: int
    memory_bytes: int
    shm_bytes: int
    gpus: str | None                   # None, "all" or "0,1"
    spill_host_dir: str | None         # None: nothing mounted (a negative test)
    spill_owner: int                   # who owns the host spill dir (the run uid unless testing)
    name: str
    env: dict[str, str] = field(default_factory=dict)
    smoke_args: tuple[str, ...] = ()
    tmpfs_bytes: int = 64 * 2**20
    timeout_s: int = 720
    memlock: int | None = None         # None: unlimited (-1), the profile's ask
    notes: tuple[str, ...] = ()        # where this run had to differ from the profile, and why


@dataclass
class SmokeResult:
    plan: dict
    argv: list[str]
    exit_code: int | None
    oom_killed: bool
    seconds: float
    verdict: str
    problems: list[str]
    report: dict | None
    stderr_tail: str


def parse_size(text: str, flag: str) -> int:
    """'1g', '512m', '1073741824' -> bytes (docker's binary units)."""
    m = _SIZE.match(str(text).strip())
    if not m:
        raise ConfigError(flag, f"{text!r} is not a size", "use a number with an optional k, m or g suffix (1g)")
    return int(float(m.group(1)) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[m.group(2).lower()])


def pick_uid(value: str | int | None, default: int, rng: random.Random | None = None) -> int:
    """'random' -> an arbitrary uid that exists nowhere in the image (OpenShift style)."""
    if value in (None, ""):
        return default
    if str(value) == "random":
        return (rng or random.SystemRandom()).randint(100000, 2**31 - 2)
    try:
        uid = int(value)
    except ValueError:
        raise ConfigError("--uid", f"{value!r} is not a number or 'random'", "pass --uid 1001 or --uid random") from None
    if uid <= 0:
        raise ConfigError("--uid", "the smoke test runs as a non-root user", "pass a uid > 0")
    return uid


def env_pairs(items: list[str] | None) -> dict[str, str]:
    """Pure: --env KEY=VALUE flags -> a dict; ConfigError naming the flag for anything else."""
    pairs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError("--env", f"{item!r} is not KEY=VALUE", "pass --env NAME=value")
        pairs[key] = value
    return pairs


def plan_smoke(variant, arch, mode: str, uid: int, memory: str, shm: str, gpus: str | None,
               spill_root: Path | None, spill_owner: int | None = None, env: dict | None = None,
               smoke_args: tuple[str, ...] = (), image: str | None = None) -> SmokePlan:
    """Pure: what to run. `spill_root` None means no spill mount at all."""
    if mode not in ("cpu", "gpu", "cudf"):
        raise ConfigError("--mode", f"{mode!r} is not cpu, gpu or cudf", "pass --mode cpu, gpu or cudf")
    if mode != "cpu" and not gpus:
        raise ConfigError("--gpus", f"mode {mode} needs GPUs", "pass --gpus all (or --gpus 0)")
    if mode != "cpu" and not variant.cuda:
        raise ConfigError("--variant", f"{variant.id} has no CUDA", "use a cuda* variant for --mode gpu/cudf")
    name = f"rapidship-smoke-{variant.id}-{uuid.uuid4().hex[:8]}"
    return SmokePlan(variant=variant.id, arch=arch, ref=image or variant.local_ref(arch, run_id()), mode=mode, uid=uid,
                     memory_bytes=parse_size(memory, "--memory"), shm_bytes=parse_size(shm, "--shm-size"),
                     gpus=gpus or None, spill_host_dir=str(spill_root / name) if spill_root else None,
                     spill_owner=uid if spill_owner is None else spill_owner, name=name, env=dict(env or {}),
                     smoke_args=tuple(smoke_args))


def memlock_for(mode: str, host_hard: int | None, can_raise: bool) -> tuple[int | None, tuple[str, ...]]:
    """Pure: the memlock ulimit to ask for. The profile wants unlimited (pinned host buffers for
    device <-> host copies). A sandboxed engine host that may not raise its own hard limit makes
    runc refuse the container; CPU mode pins nothing, so it runs under the host's hard limit and
    says so. GPU modes keep asking for unlimited and fail loudly."""
    if host_hard is None or can_raise or mode != "cpu":
        return None, ()
    return host_hard, (f"memlock=-1 refused on this engine host (hard limit {host_hard} B, not raisable even "
                       f"as root): ran with memlock={host_hard}; CPU mode pins no memory",)


def gpu_flag(gpus: str) -> str:
    """--gpus value: which devices, and only the compute and utility driver capabilities."""
    devices = "all" if gpus == "all" else f'"device={gpus}"'
    return f'{devices},"capabilities=compute,utility"'


def hardened_flags(memory_bytes: int, shm_bytes: int, uid: int, tmpfs_bytes: int, memlock: int | None,
                   network: str = "none", spill_host_dir: str | None = None, gpus: str | None = None,
                   env: dict | None = None) -> list[str]:
    """Pure: the hardened run profile as `docker run` flags (the smoke and every container of the
    cluster smoke): the memory cap with no swap, /dev/shm, a non-root uid in group 0, a read-only
    root with a small tmpfs /tmp, no new privileges, no capabilities, the memlock ulimit, one
    network (none by default), the spill dir bind-mounted, GPUs, environment."""
    argv = ["--memory", str(memory_bytes), "--memory-swap", str(memory_bytes),
            "--shm-size", str(shm_bytes),
            "--user", f"{uid}:0",
            "--read-only", "--tmpfs", f"/tmp:rw,nosuid,nodev,size={tmpfs_bytes},mode=1777",
            "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
            "--ulimit", "memlock=-1:-1" if memlock is None else f"memlock={memlock}:{memlock}",
            "--network", network]
    if spill_host_dir:
        argv += ["--volume", f"{spill_host_dir}:{SPILL_IN_CONTAINER}:rw"]
    if gpus:
        argv += ["--gpus", gpu_flag(gpus)]
    for key, value in sorted((env or {}).items()):
        argv += ["--env", f"{key}={value}"]
    return argv


def run_argv(plan: SmokePlan, cli: str = "docker") -> list[str]:
    """Pure: the hardened `docker run` argv."""
    return [cli, "run", "--name", plan.name,
            *hardened_flags(plan.memory_bytes, plan.shm_bytes, plan.uid, plan.tmpfs_bytes, plan.memlock,
                            spill_host_dir=plan.spill_host_dir, gpus=plan.gpus, env=plan.env),
            plan.ref, "rapids-smoke", "spill", "--mode", plan.mode, *plan.smoke_args]


def judge_run(exit_code: int | None, oom_killed: bool, stdout: str, stderr: str) -> tuple[str, list[str], dict | None]:
    """Pure: PASS only with exit 0, no OOM kill, and a report whose verdict is PASS."""
    problems: list[str] = []
    report = _last_json(stdout)
    if exit_code is None:
        problems.append("the container did not finish in time")
    if oom_killed or exit_code == OOM_EXIT:
        problems.append(f"OOM KILL: the container was killed for memory (exit {exit_code}, OOMKilled={oom_killed}): "
                        "it did not spill in time")
    fatal = [line.split("FATAL:", 1)[1].strip() for line in stderr.splitlines() if "rapids-doctor: FATAL:" in line]
    if fatal:
        problems.append(f"preflight refused to start: {fatal[0]}")
    if report is None and not fatal and not problems:
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        problems.append(f"no JSON report from rapids-smoke (exit {exit_code}): {tail}")
    if report is not None:
        problems += report.get("problems", [])
        if report.get("verdict") != "PASS" and not report.get("problems"):
            problems.append(f"the report says {report.get('verdict')}")
    if exit_code not in (0, None) and not problems:
        problems.append(f"rapids-smoke exited {exit_code}")
    return ("PASS" if not problems else "FAIL"), problems, report


def _last_json(stdout: str) -> dict | None:
    start = stdout.find("{")
    while start != -1:
        try:
            value = json.loads(stdout[start:])
            return value if isinstance(value, dict) else None
        except json.JSONDecodeError:
            start = stdout.find("\n{", start + 1)
            start = start + 1 if start != -1 else -1
    return None


# ---- edge ----

def host_memlock() -> tuple[int | None, bool]:
    """This host's hard memlock limit (None = unlimited) and whether a child may raise it."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if hard == resource.RLIM_INFINITY:
        return None, True
    probe = subprocess.run([sys.executable, "-c", "import resource as r; r.setrlimit(r.RLIMIT_MEMLOCK, "
                            "(r.RLIM_INFINITY, r.RLIM_INFINITY))"], capture_output=True, check=False)
    return hard, probe.returncode == 0


def built_image(ws: Workspace, variant: str, arch: str) -> str | None:
    """The image id `invoke build` recorded: immune to the tag being moved by a later build. No
    record: None (the tag is used); a corrupt one is an error, not a silent fallback."""
    from rapidship.imagebuild.buildkit import read_record

    if not ws.build(variant, arch).is_file():
        return None
    return read_record(ws, variant, arch).image_id

def prepare_spill_dir(plan: SmokePlan) -> None:
    if plan.spill_host_dir:
        make_spill_dir(Path(plan.spill_host_dir), plan.spill_owner)


def make_spill_dir(path: Path, owner: int) -> None:
    """A fresh host spill dir: mode 0700, owned by `owner` (the run uid), group 0."""
    path.mkdir(parents=True, exist_ok=False)
    path.chmod(0o700)
    os.chown(path, owner, 0)


def smoke(plan: SmokePlan) -> SmokeResult:
    if not ENGINE.exists(plan.ref):
        raise RapidshipError(f"image {plan.ref}", "not in the engine",
                             f"build it: invoke build --variant {plan.variant} --arch {plan.arch}")
    prepare_spill_dir(plan)
    argv = run_argv(plan, ENGINE.cli)
    start = time.monotonic()
    try:
        run = ENGINE.run_cli(argv[1:], timeout=plan.timeout_s)
        stdout, stderr, timed_out = run.stdout, run.stderr, False
    except subprocess.TimeoutExpired as exc:
        stdout = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        timed_out = True
        ENGINE.kill(plan.name)
    seconds = round(time.monotonic() - start, 1)
    state = ENGINE.container_state(plan.name)
    ENGINE.remove_container(plan.name)
    if plan.spill_host_dir:
        shutil.rmtree(plan.spill_host_dir, ignore_errors=True)
    code = None if timed_out else state.get("ExitCode", run.returncode)
    verdict, problems, report = judge_run(code, bool(state.get("OOMKilled")), stdout, stderr)
    return SmokeResult(plan=asdict(plan), argv=argv, exit_code=code, oom_killed=bool(state.get("OOMKilled")),
                       seconds=seconds, verdict=verdict, problems=problems, report=report,
                       stderr_tail="\n".join(stderr.strip().splitlines()[-20:]))


NEGATIVE_ENV = {"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "False", "DASK_DISTRIBUTED__WORKER__MEMORY__SPILL": "False",
                "RAPIDS_DOCTOR": "off"}


def negative_markers(plan: dict) -> list[str]:
    """Pure: what makes a run a deliberate negative one (a run meant to fail, as docs/spill.md shows):
    no spill mount, a spill dir owned by someone else, dask spilling or the preflight switched off."""
    out = []
    if "spill_host_dir" in plan and not plan["spill_host_dir"]:
        out.append("no-spill-mount")
    if plan.get("spill_owner") is not None and plan.get("spill_owner") != plan.get("uid"):
        out.append(f"spill-owner-{plan['spill_owner']}")
    env = plan.get("env") or {}
    out += [f"{key.rsplit('__', 1)[-1].lower()}-{value.lower()}" for key, value in NEGATIVE_ENV.items()
            if str(env.get(key, "")).lower() == value.lower()]
    return out


def record_name(plan: dict) -> str:
    """build/smoke/<v>-<a>-<mode>-uid<uid>[-negative-<what>].json: a deliberate negative run gets a name
    of its own, so it never replaces the record of the real run of the same image."""
    markers = negative_markers(plan)
    return (f"{plan['variant']}-{plan['arch']}-{plan['mode']}-uid{plan['uid']}"
            + (f"-negative-{'-'.join(markers)}" if markers else "") + ".json")


def write_record(result: SmokeResult, out_dir: Path) -> Path:
    return save(out_dir / record_name(result.plan), result)


def raise_on_failure(result: SmokeResult, record: Path) -> None:
    if result.verdict != "PASS":
        raise GateFailure(f"smoke {result.plan['variant']} ({result.plan['mode']}, uid {result.plan['uid']})",
                          "; ".join(result.problems), f"each problem says what failed; docs/spill.md says what "
                          f"it means and what to change; the record {record} has the report and the log tail")
