"""What the command about to run asks for: a dask worker or the spill smoke or neither (behind
wrappers and plain `sh -c` lines), how many workers, which memory and device limits, which spill
directory, UCX. Pure functions over argv and the environment.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from .units import parse_bytes


DISK_SPILL_ENV = "RAPIDS_DISK_SPILL"


DISK_SPILL_CHOICES = ("required", "optional", "auto")


@dataclass(frozen=True)
class Intent:
    """What the container is about to run, as far as disk spill and memory limits go."""

    command: list[str] = field(default_factory=list)
    program: str | None = None      # "dask worker", "dask cuda worker", "rapids-smoke"; None: anything else
    disk_spill: str = "required"    # required | optional
    why: str = "no command given: the full check"
    memory_limit: int | None = None  # bytes per worker the command asks for (None: none, auto or a fraction)
    workers: int = 1                # worker processes that share the container, each with memory_limit
    limit_source: str = ""          # where memory_limit came from, for the message
    error: str | None = None        # a bad RAPIDS_DISK_SPILL / --disk-spill value
    ucx: str = ""                   # the flag that asks for UCX comms ("" = none): needs ucxx and /dev/shm
    rdma: str = ""                  # the flag that asks for InfiniBand / RDMA: needs memlock unlimited
    spill_dir: str | None = None    # the directory the command spills to (--local-directory, --spill-dir)
    device_limit: int | None = None  # device memory per worker the command asks for (--device-memory-limit)
    device_source: str = ""
    judged: bool = True             # False: a shell line that could not be read (said in `why`)
    rmm_pool: int | None = None     # the RMM pool a dask cuda worker asks for (--rmm-pool-size; None: none, a fraction)
    rmm_pool_source: str = ""


_DASK_UNITS = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "ki": 2**10, "mi": 2**20, "gi": 2**30,
               "ti": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "k": 10**3, "m": 10**6,
               "g": 10**9, "t": 10**12, "b": 1, "": 1}


def dask_memory_limit(text: str | None) -> int | None:
    """Pure: a dask worker's --memory-limit in bytes, read as dask reads it (k/m/g decimal, ki/kib binary).
    None where it is no absolute size: unset, "auto", 0 (no limit), a fraction of system memory
    (0 < x <= 1, which dask takes of the container's own limit) or something dask would refuse itself."""
    if text is None:
        return None
    t = str(text).strip().lower().replace(" ", "")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[0-9]+)?)([a-z]*)", t)
    if not m or m.group(2) not in _DASK_UNITS:
        return None
    value = float(m.group(1))
    if m.group(2) == "" and value <= 1:
        return None                 # 0 = no limit, 0 < x <= 1 = a fraction
    return int(value * _DASK_UNITS[m.group(2)])


# programs (by the name they are run as) that hold dask worker data and spill it to disk
_WORKER_PROGRAMS = {"dask-worker": "dask worker", "dask-cuda-worker": "dask cuda worker",
                    "rapids-smoke": "rapids-smoke"}


_WORKER_MODULES = {"distributed.cli.dask_worker": "dask worker", "dask_cuda.cli.dask_cuda_worker": "dask cuda worker",
                   "rapids_runtime.smoke": "rapids-smoke", "rapidship.runtime.smoke": "rapids-smoke"}


_PYTHON_OPTS_WITH_VALUE = {"-X", "-W"}


def classify(command: list[str]) -> tuple[str | None, list[str]]:
    """Pure: which disk-spilling program a command line starts, and that program's arguments.

    Knows `dask worker`, `dask cuda worker` (also `dask-worker`, `dask-cuda-worker`, `python -m dask
    worker`, `python -m distributed.cli.dask_worker`) and `rapids-smoke` (also `python -m
    rapids_runtime.smoke`), each possibly after `env VAR=value`. `dask scheduler`, `python job.py`
    and anything else: (None, []). A shell line (`sh -c "..."`) is not looked into: set
    RAPIDS_DISK_SPILL=required for such a container.
    """
    argv = unwrap(list(command))
    if not argv:
        return None, []
    prog, rest = os.path.basename(argv[0]), argv[1:]
    if re.fullmatch(r"python[0-9.]*", prog):
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] != "-m":
            i += 2 if rest[i] in _PYTHON_OPTS_WITH_VALUE else 1
        if i + 1 >= len(rest) or rest[i] != "-m":
            return None, []
        module, rest = rest[i + 1], rest[i + 2:]
        if module in _WORKER_MODULES:
            return _WORKER_MODULES[module], rest
        if module != "dask":
            return None, []
        prog = "dask"
    if prog in _WORKER_PROGRAMS:
        return _WORKER_PROGRAMS[prog], rest
    if prog == "dask":
        if rest[:2] == ["cuda", "worker"]:
            return "dask cuda worker", rest[2:]
        if rest[:1] == ["worker"]:
            return "dask worker", rest[1:]
    return None, []


# Programs that run the rest of their command line: name -> (options that take a value, how many
# plain words before the command: timeout's DURATION). A worker behind them is still a worker.
WRAPPERS = {"env": ({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}, 0),
            "nice": ({"-n", "--adjustment"}, 0), "ionice": ({"-c", "-n", "-p"}, 0),
            "timeout": ({"-s", "--signal", "-k", "--kill-after"}, 1), "nohup": (set(), 0), "exec": (set(), 0),
            "tini": ({"-p", "-e"}, 0), "dumb-init": ({"-r", "--rewrite"}, 0), "stdbuf": ({"-i", "-o", "-e"}, 0),
            "taskset": (set(), 1), "numactl": (set(), 0), "chrt": (set(), 1), "setpriv": (set(), 0),
            "catatonit": (set(), 0)}


def unwrap(argv: list[str]) -> list[str]:
    """Pure: the command behind wrappers (env VAR=x, nice -n 5, timeout 1d, tini --, dumb-init,
    exec, taskset -c 0-3, ...), however many are stacked."""
    for _ in range(8):
        if not argv or os.path.basename(argv[0]) not in WRAPPERS:
            return argv
        name = os.path.basename(argv[0])
        with_value, words = WRAPPERS[name]
        rest = argv[1:]
        while rest:
            a = rest[0]
            if a == "--":
                rest = rest[1:]
                break
            if name == "env" and "=" in a and not a.startswith("-"):
                rest = rest[1:]
            elif a in with_value:
                rest = rest[2:]
            elif a.startswith("-") and len(a) > 1:
                rest = rest[1:]
            else:
                break
        argv = rest[words:]
    return argv


SHELLS = ("sh", "bash", "dash", "ash", "zsh")


SHELL_OPERATORS = re.compile(r"[;&|<>`$()]")


def shell_command(command: list[str]) -> tuple[list[str] | None, bool]:
    """Pure: (the argv of `sh -c "LINE"`, True) when LINE is one plain command; (None, True) for a
    shell line with operators, variables or substitutions, which cannot be judged; (None, False)
    when `command` is no shell line at all."""
    argv = unwrap(list(command))
    if len(argv) < 3 or os.path.basename(argv[0]) not in SHELLS or not argv[1].startswith("-") or "c" not in argv[1]:
        return None, False
    line = argv[2].strip()
    if line.startswith("exec "):
        line = line[5:]
    if SHELL_OPERATORS.search(line):
        return None, True
    try:
        return shlex.split(line), True
    except ValueError:
        return None, True


def _option(args: list[str], *names: str) -> str | None:
    """Pure: the value of the last `--name value` / `--name=value` among args."""
    value = None
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                value = args[i + 1]
            elif a.startswith(n + "="):
                value = a[len(n) + 1:]
    return value


def _count(text: str | None, default: int) -> int:
    try:
        n = int(str(text))
    except ValueError:
        return default
    return n if n > 0 else default


def dask_nworkers(text: str | None, cpus: int) -> int:
    """Pure: the worker processes `dask worker --nworkers X` starts, resolved as distributed does:
    a count; -1 = one per CPU (negative n: CPUs + 1 + n); "auto": n <= 4 CPUs one each, else the
    smallest factor of n at least sqrt(n)."""
    if text is None:
        return 1
    if str(text).strip() == "auto":
        if cpus <= 4:
            return max(1, cpus)
        return min(f for f in range(1, cpus + 1) if cpus % f == 0 and f * f >= cpus)
    try:
        n = int(str(text))
    except ValueError:
        return 1
    return max(1, cpus + 1 + n) if n < 0 else max(1, n)


def _worker_memory(program: str | None, args: list[str], gpu_count: int, env,
                   cpus: int = 1) -> tuple[int | None, int, str]:
    """Pure: (memory_limit per worker, workers, where it came from) for a worker command line."""
    if program == "rapids-smoke":
        raw = _option(args, "--memory-limit")
        try:
            limit = parse_bytes(raw)
        except ValueError:
            limit = None            # the smoke refuses a bad size itself
        mode = _option(args, "--mode") or "cpu"
        workers = _count(_option(args, "--workers"), 1) if mode == "cpu" else 1
        return limit, workers, "rapids-smoke --memory-limit"
    if program == "dask worker":
        limit = dask_memory_limit(_option(args, "--memory-limit"))
        return limit, dask_nworkers(_option(args, "--nworkers", "--nprocs"), cpus), "dask worker --memory-limit"
    if program == "dask cuda worker":   # one worker per visible GPU, each with --memory-limit
        limit = dask_memory_limit(_option(args, "--memory-limit"))
        visible = env.get("CUDA_VISIBLE_DEVICES")
        workers = len([d for d in visible.split(",") if d.strip()]) if visible else gpu_count
        return limit, max(1, workers), "dask cuda worker --memory-limit"
    return None, 1, ""


UCX_FLAGS = ("--enable-tcp-over-ucx", "--enable-nvlink", "--enable-infiniband", "--enable-rdmacm")


RDMA_FLAGS = ("--enable-infiniband", "--enable-rdmacm")


UCX_MIN_SHM = 1024 * 1024 * 1024  # UCX's shared-memory transport and worker processes: --shm-size >= 1g


def ucx_wanted(program: str | None, args: list[str]) -> tuple[str, str]:
    """Pure: (the flag asking for UCX, the flag asking for RDMA) of a dask worker / scheduler command."""
    if program is None:
        return "", ""
    rdma = next((a for a in args if a.split("=")[0] in RDMA_FLAGS and not a.endswith("=False")), "")
    flag = next((a for a in args if a.split("=")[0] in UCX_FLAGS and not a.endswith("=False")), "")
    protocol = _option(args, "--protocol") or ""
    if not flag and protocol.startswith("ucx"):
        flag = f"--protocol {protocol}"
    if not flag:
        flag = next((a for a in args if a.startswith(("ucx://", "ucxx://"))), "")
    return flag, rdma


def intent_for(command: list[str] | None, environ: dict | None = None, gpu_count: int = 0,
               override: str | None = None, cpus: int = 1) -> Intent:
    """Pure: whether disk spill is required for this command, and the memory limit it asks for.

    Order: `override` (--disk-spill), then $RAPIDS_DISK_SPILL, then the command (required for dask
    workers and rapids-smoke, optional for anything else); with no command at all, required.
    """
    env = os.environ if environ is None else environ
    command = list(command or [])
    program, args = classify(command)
    inner, is_shell = shell_command(command)
    if program is None and inner is not None:
        program, args = classify(inner)
    judged = not (is_shell and inner is None)
    limit, workers, source = _worker_memory(program, args, gpu_count, env, cpus)
    spill = _option(args, "--local-directory", "--spill-dir") if program else None
    try:
        device = parse_bytes(_option(args, "--device-memory-limit")) if program else None
    except ValueError:
        device = None
    device_source = f"{program} --device-memory-limit" if device else ""
    # dask-cuda reads the pool's size as dask reads sizes; a fraction (0 < x <= 1) is of the GPU: never above it
    pool = dask_memory_limit(_option(args, "--rmm-pool-size")) if program == "dask cuda worker" else None
    shown = shlex.join(command) if command else ""
    if len(shown) > 80:
        shown = shown[:77] + "..."
    error = None
    choice, origin = "auto", ""
    for raw, name in ((override, "--disk-spill"), (env.get(DISK_SPILL_ENV), DISK_SPILL_ENV)):
        value = (raw or "").strip().lower()
        if not value:
            continue
        if value not in DISK_SPILL_CHOICES:
            error = (f"{name}={raw!r} is not one of {', '.join(DISK_SPILL_CHOICES)}: say whether this container "
                     "needs disk spill (required), may run without it (optional) or decide from the command (auto)")
            break
        choice, origin = value, name
        break
    if choice != "auto":
        disk, why = choice, f"{origin}={choice}"
    elif not command:
        disk, why = "required", "no command given: the full check"
    elif program:
        disk, why = "required", f"`{shown}` is {'the spill smoke' if program == 'rapids-smoke' else 'a ' + program}"
    elif not judged:
        disk, why = "optional", (f"`{shown}` is a shell line with operators or variables that could not be judged "
                                 f"(a dask worker inside it is not checked: {DISK_SPILL_ENV}=required insists)")
    else:
        disk, why = "optional", f"`{shown}` is no dask worker and no rapids-smoke"
    ucx, rdma = ucx_wanted(program, args)
    return Intent(command, program, disk, why, limit, workers, source, error, ucx, rdma, spill, device,
                  device_source, judged, pool, f"{program} --rmm-pool-size" if pool else "")
