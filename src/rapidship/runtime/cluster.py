"""The cluster job: one job across a running dask cluster that must spill on every worker and
shuffle data between them, with an exact answer.

    python -m rapids_runtime.cluster --scheduler tcp://scheduler:8786 --workers 2 --data-bytes 1.1GiB

It connects to the scheduler (a `dask scheduler` plus `dask worker` / `dask cuda worker`
processes, each under its own memory cap), waits for --workers workers, then:

  persist   a square int64 array of --data-bytes, value i*C + j at row i, column j, made on the
            workers in row blocks (never shipped from the client), held across all of them: more
            than one worker's memory, so every worker must spill to its local directory;
  shuffle   rechunked from row blocks to column blocks and held again: every output block takes
            a piece of every input block, so data moves between all workers (an all-to-all, the
            array form of a groupby or merge shuffle);
  check     per column, the sum and the row-weighted sum of the shuffled array against their
            closed forms (exact: int64 partial sums bounded below 2**63, added as Python ints).

After each hold it asks every worker for its tiers (keys and bytes in memory and on disk, spill
files and bytes under its local directory, bytes it sent to other workers, its peak RSS and the
OOM kills its cgroup saw). A worker that spilled nothing, no data moved between workers, a
wrong sum, a worker that left the cluster (unless --allow-worker-loss: then dask recomputes what
it held on the others and the loss is a note) or a step past --timeout is a failure. The report
is JSON on stdout, progress on stderr ("rapids-cluster: phase <name>" lines mark each step).

Standard library at import time; dask and numpy (or cupy with --xp cupy) are imported by the job.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

from .cgroup_view import read_cgroup
from .session import DEFAULT_WORKER_TIMEOUT, Unfinished, bounded, finish, wait_for_workers, wait_held
from .smoke_verdict import INT64_MAX
from .spill_view import dir_usage
from .units import MiB, parse_bytes
from .worker_probes import device_tiers, host_tiers

FAIL_EXIT = 1
PHASE = "rapids-cluster: phase "          # progress marker lines the host side waits for
DEFAULT_CHUNK = 32 * MiB
DEFAULT_TIMEOUT = 300.0


# ---- the shape and the closed forms (pure) ----

def plan_shape(data_bytes: int, chunk_bytes: int, n_workers: int) -> tuple[int, int]:
    """Pure: (side, blocks) of the square array: `blocks` row blocks become `blocks` column blocks,
    each about chunk_bytes, at least 2 per worker so every worker holds and sends several."""
    elems = max(1, data_bytes // 8)
    blocks = max(2 * max(1, n_workers), round(elems / max(1, chunk_bytes // 8)))
    side = max(blocks, math.isqrt(elems) // blocks * blocks)
    return side, blocks


def check_fits(side: int) -> str | None:
    """Pure: why the exact check cannot be done at this size (None: it can). The largest partial
    sum is the row-weighted column sum, below side**4 / 2 (side rows, values below side**2)."""
    if side**4 // 2 > INT64_MAX:
        return f"array side {side} too large for exact int64 column sums (at most {math.isqrt(math.isqrt(2 * INT64_MAX))})"
    return None


def expected_columns(side: int) -> tuple[list[int], list[int]]:
    """Pure: per column j of the side x side array with a[i, j] = i*side + j: the sum over rows,
    and the sum of i * a[i, j]."""
    n = side
    s1 = n * (n - 1) // 2                  # sum of i
    s2 = (n - 1) * n * (2 * n - 1) // 6    # sum of i**2
    return [n * s1 + n * j for j in range(n)], [n * s2 + j * s1 for j in range(n)]


def total_sum(side: int) -> int:
    """Pure: the sum of every value, 0 .. side**2 - 1."""
    n = side * side
    return n * (n - 1) // 2


def worker_problems(phases: dict, data_bytes: int, limits: dict, lost: list[str] | None = None) -> list[str]:
    """Pure: why the per-worker tiers fail the run. Every worker seen holding data must have spilled
    (disk keys and bytes, and files under its local directory) in some phase; the data must exceed
    one worker's memory limit; the shuffle must have moved bytes between workers (unless workers
    were lost: then the survivors may have held every piece themselves)."""
    problems = []
    biggest = max(limits.values(), default=0)
    if limits and data_bytes <= biggest:
        problems.append(f"dataset {data_bytes} B fits one worker's memory limit ({biggest} B): it proves nothing; "
                        "make it larger")
    names = sorted({w for views in phases.values() for w in views})
    for name in names:
        views = [views[name] for views in phases.values() if name in views]
        disk = max(v["disk"][1] for v in views)
        keys = max(v["disk"][0] for v in views)
        files = max(v["spill_files"] for v in views)
        if not (disk and keys and files):
            held = max(v["memory"][1] for v in views)
            problems.append(f"NO SPILL on worker {name}: nothing reached its disk tier ({keys} keys, {disk} B, "
                            f"{files} spill files) while it held {held} B in memory")
    before, after = phases.get("persisted", {}), phases.get("shuffled", {})
    if after:
        sent = sum(v["sent_bytes"] - before.get(w, {}).get("sent_bytes", 0) for w, v in after.items())
        if sent <= 0 and not lost:
            problems.append("NO SHUFFLE: no worker sent data to another during the shuffle")
    return problems


# ---- on the workers (module level: the workers import rapids_runtime too) ----

def _block(side: int, xp_name: str, block_info=None):
    """One block of the array, made where it lives: a[i, j] = i*side + j."""
    import importlib

    xp = importlib.import_module(xp_name)
    (r0, r1), (c0, c1) = block_info[None]["array-location"]
    rows = xp.arange(r0, r1, dtype="int64")[:, None] * side
    return rows + xp.arange(c0, c1, dtype="int64")[None, :]


def _split(block, step: int) -> list:
    """One row block cut into its column groups (one read of the block, from memory or disk)."""
    return [block[:, c:c + step] for c in range(0, block.shape[1], step)]


def _take(pieces: list, j: int):
    """Group j of a split block, as a copy: its sizeof is what it holds (a view would keep the
    whole block alive behind a small sizeof, out of the memory manager's sight)."""
    return pieces[j].copy()


def _concat(pieces: list):
    """One column group from a piece of every row block."""
    import importlib

    xp = importlib.import_module(type(pieces[0]).__module__.split(".")[0])
    return xp.concatenate(pieces, axis=0)


def cgroup_oom_kills(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """OOM kills the memory cgroup of this process saw (v2 memory.events, v1 memory.oom_control);
    None where neither can be read."""
    cg = read_cgroup(root)
    if not cg.path:
        return None
    for name in ("memory.events", "memory.oom_control"):
        try:
            text = (Path(cg.path) / name).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def worker_view(dask_worker) -> dict:
    """Inside a worker: its tiers, spill files, bytes sent to peers, peak RSS and OOM kills."""
    device = hasattr(dask_worker.data, "device")
    view = device_tiers(dask_worker) if device else host_tiers(dask_worker)
    if device:   # one host-memory tier for the report; the device tier stays under its own name
        view["memory"] = view.pop("host")
    files, nbytes = dir_usage(dask_worker.local_directory, only_storage=False)
    view.update(name=str(dask_worker.name), address=dask_worker.address, spill_files=files, spill_file_bytes=nbytes,
                sent_bytes=int(getattr(dask_worker, "transfer_outgoing_bytes_total", 0)),
                received_count=int(getattr(dask_worker.state, "transfer_incoming_count_total", 0)),
                memory_limit=int(dask_worker.memory_manager.memory_limit or 0), oom_kills=cgroup_oom_kills())
    return view


# ---- the job (client side) ----

class WorkerLost(RuntimeError):
    pass


def _log(msg: str) -> None:
    print(f"rapids-cluster: {msg}", file=sys.stderr, flush=True)


def _phase(name: str) -> None:
    print(f"{PHASE}{name}", file=sys.stderr, flush=True)


class Membership:
    """Who is in the cluster, by address and name. A worker gone, or a known name back at a new
    address (its nanny restarted its process), is a loss: WorkerLost at once, or with allow_loss a
    note (dask recomputes what it held on the others)."""

    def __init__(self, workers: dict[str, str], allow_loss: bool) -> None:
        self.seen = dict(workers)          # address -> name, everyone who was ever in
        self.gone: set[str] = set()        # addresses that left
        self.allow_loss = allow_loss
        self.notes: list[str] = []

    def update(self, now: dict[str, str]) -> None:
        """Pure given `now` (address -> name of the workers in the cluster at this moment)."""
        for addr, name in now.items():
            if addr not in self.seen and name in self.seen.values():
                self._lost(f"worker {name} came back at a new address {addr} (its process was restarted: "
                           "killed or OOM-killed?)")
            self.seen.setdefault(addr, name)
        for addr, name in self.seen.items():
            if addr not in now and addr not in self.gone:
                self.gone.add(addr)
                self._lost(f"worker {name} ({addr}) left the cluster during the job")

    def lost_names(self, at_end: list[str]) -> list[str]:
        return sorted(set(self.seen.values()) - set(at_end))

    def _lost(self, message: str) -> None:
        if not self.allow_loss:
            raise WorkerLost(message)
        self.notes.append(message)
        _log(f"note: {message}; dask recomputes its data on the others")


def _workers_now(client) -> dict[str, str]:
    return {addr: str(w.get("name", addr)) for addr, w in client.scheduler_info(n_workers=-1)["workers"].items()}


def _hold(client, collection, timeout: float, members: Membership):
    """Persist and wait until every block is held, bounded by `timeout`, watching who leaves."""
    from distributed import futures_of

    held = client.persist(collection)
    wait_held(futures_of(held), timeout, lambda: members.update(_workers_now(client)),
              f"the blocks were not all held within {timeout:g} s")
    members.update(_workers_now(client))
    return held


def shuffle(x, step: int, meta):
    """Row blocks -> column blocks as a task shuffle (the array form of a groupby): a split task per
    row block (one read of the block, from memory or disk, where it lives), a piece task per
    (block, group) that copies the group out, and a concatenate per group, which gathers a piece of
    every block, from every worker, onto one."""
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    blocks = len(x.chunks[0])
    token = tokenize(x, step)
    split, piece, out = f"split-{token}", f"piece-{token}", f"shuffled-{token}"
    dsk: dict = {}
    for i in range(blocks):
        dsk[(split, i)] = (_split, (x.name, i, 0), step)
        for j in range(blocks):
            dsk[(piece, i, j)] = (_take, (split, i), j)
    for j in range(blocks):
        dsk[(out, 0, j)] = (_concat, [(piece, i, j) for i in range(blocks)])
    graph = HighLevelGraph.from_collections(out, dsk, dependencies=[x])
    return da.Array(graph, out, chunks=((x.shape[0],), (step,) * blocks), dtype=x.dtype, meta=meta)


def time_by_action(records: list[dict]) -> dict:
    """Pure: seconds the workers spent per action (compute, transfer, disk-read, disk-write, ...)
    over task-stream records, and the tasks by key prefix."""
    spent: dict[str, float] = {}
    tasks: dict[str, int] = {}
    for rec in records:
        key = rec.get("key")
        prefix = (key[0] if isinstance(key, tuple) else str(key)).rsplit("-", 1)[0]
        tasks[prefix] = tasks.get(prefix, 0) + 1
        for ss in rec.get("startstops", ()):
            spent[ss["action"]] = spent.get(ss["action"], 0.0) + ss["stop"] - ss["start"]
    return {"seconds": {k: round(v, 2) for k, v in sorted(spent.items())}, "tasks": tasks}


def snapshot(client, timeout: float) -> dict:
    """{worker name: view} of every worker now in the cluster, bounded by `timeout`; a worker that
    dies while answering is left out (the membership watch reports it)."""
    answers = bounded(lambda: client.run(worker_view, on_error="return"), timeout, "asking the workers for their tiers")
    return {v["name"]: v for v in answers.values() if isinstance(v, dict)}


def _describe(err: BaseException) -> str:
    name = type(err).__name__
    if name == "KilledWorker":
        return (f"KilledWorker: a task was on workers that died {err.args[1] if len(err.args) > 1 else ''} times "
                f"over (distributed.scheduler.allowed-failures): {err}")
    return f"{name}: {err}"


def run_job(args, report: dict, members_out: list) -> None:
    import dask
    import dask.array as da
    from distributed import Client, get_task_stream

    xp = __import__(args.xp)
    side, blocks = plan_shape(args.data_bytes, args.chunk_bytes, args.workers)
    if why := check_fits(side):
        raise ValueError(why)
    step = side // blocks
    report.update(shape=[side, side], blocks=blocks, block_bytes=step * side * 8, data_bytes=side * side * 8)
    _log(f"connecting to {args.scheduler}; {side} x {side} int64 ({side * side * 8} B) in {blocks} row blocks "
         f"-> {blocks} column blocks, {args.workers} worker(s)")
    t0 = time.monotonic()
    client = bounded(lambda: Client(args.scheduler, timeout=args.worker_timeout), args.worker_timeout + 5,
                     "connecting to the scheduler")
    report["seconds"] = seconds = {}
    try:
        wait_for_workers(client, args.workers, time.monotonic() + args.worker_timeout)
        seconds["connect"] = round(time.monotonic() - t0, 2)
        info = client.scheduler_info(n_workers=-1)["workers"]
        members = Membership(_workers_now(client), args.allow_worker_loss)
        members_out.append(members)
        report["workers_seen"] = dict(members.seen)
        report["memory_limits"] = {str(w.get("name", a)): int(w.get("memory_limit") or 0) for a, w in info.items()}
        phases = report["phases"] = {}
        meta = xp.empty((0, 0), dtype="int64")
        x = da.map_blocks(_block, side, args.xp, chunks=((step,) * blocks, (side,)), dtype="int64", meta=meta)
        _phase("persist")
        t1 = time.monotonic()
        x = _hold(client, x, args.timeout, members)
        seconds["persist"] = round(time.monotonic() - t1, 2)
        phases["persisted"] = snapshot(client, args.timeout)
        _phase("shuffle")
        t2 = time.monotonic()
        if args.shuffle == "split":
            y = shuffle(x, step, meta)
        else:
            with dask.config.set({"array.rechunk.method": args.shuffle}):
                y = x.rechunk(((side,), (step,) * blocks))
        with get_task_stream(client) as stream:
            y = _hold(client, y, args.timeout, members)
        report["shuffle_time"] = time_by_action(stream.data)
        del x
        seconds["shuffle"] = round(time.monotonic() - t2, 2)
        phases["shuffled"] = snapshot(client, args.timeout)
        _phase("check")
        t3 = time.monotonic()
        weights = da.arange(side, chunks=side, dtype="int64")
        if args.xp != "numpy":
            weights = weights.map_blocks(xp.asarray, dtype="int64", meta=xp.empty((0,), dtype="int64"))
        cols = y.sum(axis=0, dtype="int64")
        wcols = (y * weights[:, None]).sum(axis=0, dtype="int64")
        fut = client.compute([cols, wcols])
        got_cols, got_w = (f.result(timeout=args.timeout) for f in fut)
        got_cols, got_w = ([int(v) for v in (a.get() if hasattr(a, "get") else a)] for a in (got_cols, got_w))
        members.update(_workers_now(client))
        seconds["check"] = round(time.monotonic() - t3, 2)
        want_cols, want_w = expected_columns(side)
        bad = [j for j in range(side) if got_cols[j] != want_cols[j] or got_w[j] != want_w[j]]
        report["expected"] = total_sum(side)
        report["got"] = sum(got_cols)
        report["wrong_columns"] = len(bad)
        report["result_ok"] = not bad and report["got"] == report["expected"]
        if bad:
            j = bad[0]
            report["first_wrong"] = {"column": j, "sum": [got_cols[j], want_cols[j]], "weighted": [got_w[j], want_w[j]]}
        report["workers_at_end"] = sorted(_workers_now(client).values())
        report["workers_seen"] = dict(members.seen)
        report["workers_lost"] = members.lost_names(report["workers_at_end"])
        del y
    finally:
        try:
            bounded(lambda: client.close(timeout=args.close_timeout), args.close_timeout + 5, "closing the client")
        except Exception as err:  # noqa: BLE001 - a note, never the job's answer
            report.setdefault("shutdown", []).append(f"closing the client: {type(err).__name__}: {err}")
        seconds["total"] = round(time.monotonic() - t0, 2)


def judge(report: dict) -> list[str]:
    """Pure: the job's problems from its report."""
    if report.get("error"):
        return [f"the job failed: {report['error']}"]
    problems = worker_problems(report.get("phases", {}), report.get("data_bytes", 0), report.get("memory_limits", {}),
                               report.get("workers_lost"))
    if not report.get("result_ok"):
        first = report.get("first_wrong")
        problems.append(f"WRONG RESULT: expected {report.get('expected')}, got {report.get('got')}"
                        + (f"; {report.get('wrong_columns')} wrong column(s), first {first}" if first else ""))
    return problems


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rapids_runtime.cluster", description=__doc__.splitlines()[0])
    p.add_argument("--scheduler", required=True, help="scheduler address, e.g. tcp://scheduler:8786")
    p.add_argument("--workers", type=int, required=True, help="workers to wait for")
    p.add_argument("--data-bytes", type=parse_bytes, required=True, help="array size (more than one worker holds)")
    p.add_argument("--chunk-bytes", type=parse_bytes, default=DEFAULT_CHUNK, help="block size (default 32 MiB; the host side passes at most --memory-limit / 10)")
    p.add_argument("--shuffle", choices=("split", "tasks", "p2p"), default=None,
                   help="split: a task shuffle of copied pieces (default for numpy); tasks, p2p: dask's rechunk "
                        "methods (tasks is the default for cupy)")
    p.add_argument("--xp", choices=("numpy", "cupy"), default="numpy", help="array module of the blocks")
    p.add_argument("--allow-worker-loss", action="store_true",
                   help="a worker leaving is a note (dask recomputes its data on the others), not a failure")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds each step may take")
    p.add_argument("--worker-timeout", type=float, default=DEFAULT_WORKER_TIMEOUT,
                   help="seconds to connect and see --workers workers")
    p.add_argument("--close-timeout", type=float, default=15.0)
    p.add_argument("--out", help="also write the JSON report to this file")
    return p


def default_shuffle(xp: str) -> str:
    """Measured on an H200 (docs/cluster.md): with CuPy blocks over UCX the split shuffle's many
    small transfers timed out a UCX connect and crashed a worker, dask's task rechunk passed; on
    small CPU workers it is the other way round (the rechunk's pieces hid memory)."""
    return "tasks" if xp == "cupy" else "split"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.shuffle = args.shuffle or default_shuffle(args.xp)
    t0 = time.monotonic()
    report: dict = {"scheduler": args.scheduler, "workers": args.workers, "shuffle": args.shuffle,
                    "xp": args.xp, "allow_worker_loss": args.allow_worker_loss, "error": None}
    members: list[Membership] = []
    try:
        run_job(args, report, members)
    except Exception as err:  # noqa: BLE001 - whatever happened, the report says it
        if not isinstance(err, (TimeoutError, Unfinished, WorkerLost)):
            traceback.print_exc(file=sys.stderr)
        report["error"] = _describe(err)
    report["notes"] = [*(members[0].notes if members else []), *report.pop("shutdown", [])]
    report["problems"] = judge(report)
    report["verdict"] = "FAIL" if report["problems"] else "PASS"
    report["wall_seconds"] = round(time.monotonic() - t0, 2)
    text = json.dumps(report, indent=2, default=str)
    print(text, flush=True)
    if args.out:
        try:
            Path(args.out).write_text(text + "\n")
        except OSError as err:
            _log(f"cannot write the report to {args.out}: {err}")
    for line in report["problems"]:
        _log(f"FAIL: {line}")
    _phase("done")
    return 0 if report["verdict"] == "PASS" else FAIL_EXIT


if __name__ == "__main__":
    finish(main())
