"""A dask cluster session that always ends: its start, the wait for its workers, the wait for data to
be held, the drain, the close and the process's exit each bounded; what goes wrong is an error that
says why, or a note, never a hang. Shared by the spill smoke and the cluster job. Standard library
at import time; distributed is imported by the call that needs it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from contextlib import contextmanager

from .worker_probes import held_keys


DEFAULT_WORKER_TIMEOUT = 60.0     # seconds a cluster may take to have its workers (CUDA context, imports)
DEFAULT_CLOSE_TIMEOUT = 15.0      # seconds closing the client, and then the cluster, may take each
# seconds the workers may take to free what they held before the close: a 20 GB GPU run (14 GB on disk)
# took 23 and 25 s on the H200, during which a worker answers nothing
DEFAULT_DRAIN_TIMEOUT = 60.0
CLOSE_SLACK = 5.0                 # on top of the timeout handed to close(): its own last kill and join


def log(msg: str) -> None:
    print(f"rapids-smoke: {msg}", file=sys.stderr, flush=True)


class WorkerDied(RuntimeError):
    pass


class NoWorker(RuntimeError):
    """No worker joined the cluster within --worker-timeout."""


class WorkerDiedAtStart(RuntimeError):
    """A worker process exited while the cluster was starting (its nanny failed to start it)."""


class Unfinished(RuntimeError):
    """A bounded call was still running at its deadline; it is left to a daemon thread."""


# What was left running in a daemon thread (a start or close that did not return in time):
# then exit must not wait for the interpreter's shutdown, which could wait on it forever.
ABANDONED: list[str] = []


def bounded(fn, timeout: float, what: str, on_late=None, watch=None):
    """fn() in a daemon thread, waited for at most `timeout` seconds: its value, or its exception
    re-raised, or Unfinished. A value that arrives after the deadline goes to on_late (to close it).
    watch(), called every 0.1 s while fn runs, may raise to stop waiting at once (fn is then left
    as at the deadline)."""
    box: dict = {}
    lock = threading.Lock()

    def target():
        try:
            value = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            with lock:
                box["error"] = err
            return
        with lock:
            late = box.get("late", False)
            box["value"] = value
        if late and on_late is not None:
            try:
                on_late(value)
            except Exception:  # noqa: BLE001 - nobody is waiting any more
                pass

    thread = threading.Thread(target=target, name=f"rapids-smoke: {what}", daemon=True)
    thread.start()
    deadline, stop = time.monotonic() + timeout, None
    while thread.is_alive() and time.monotonic() < deadline and stop is None:
        thread.join(min(0.1, max(0.0, deadline - time.monotonic())) if watch else timeout)
        if watch is not None and thread.is_alive():
            try:
                watch()
            except Exception as err:  # noqa: BLE001 - raised once fn is left behind
                stop = err
    with lock:
        done = "value" in box or "error" in box
        if not done:
            box["late"] = True
    if not done:
        ABANDONED.append(what)
        if stop is not None:
            raise stop
        raise Unfinished(f"{what} did not finish within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def wait_for_workers(client, n_workers: int, deadline: float, clock=time.monotonic, sleep=time.sleep) -> int:
    """Poll the scheduler until n_workers have joined; NoWorker at the deadline."""
    while True:
        have = len(client.scheduler_info()["workers"])
        if have >= n_workers:
            return have
        if clock() >= deadline:
            raise NoWorker(f"{have} of {n_workers} worker(s) joined the scheduler")
        sleep(0.2)


def _client_for(cluster, timeout: float):
    from distributed import Client

    return Client(cluster, timeout=timeout)


def _close_quietly(obj, timeout: float) -> None:
    try:
        obj.close(timeout=timeout)
    except Exception:  # noqa: BLE001 - a late cluster nobody waits for
        pass


def drain(client, timeout: float, poll: float = 0.2) -> tuple[int, float]:
    """Wait, bounded, until no worker holds data any more: (keys still held, seconds waited).

    The stages released their collections; the workers then free device memory and delete spill
    files while they are alive. Closing before that is done made the nanny kill a worker still
    busy tearing down gigabytes ("Worker process still alive after 4.0 seconds") and every GPU run
    ended with "closing the cluster failed: TimeoutError"."""
    import gc

    gc.collect()  # a released collection caught in a reference cycle keeps its futures until the GC runs
    t0 = time.monotonic()
    held, said = -1, 0.0
    while time.monotonic() - t0 < timeout:
        asked = time.monotonic()
        try:
            held = sum(client.run(held_keys).values())
        except Exception:  # noqa: BLE001 - a worker already gone: nothing more to wait for here
            return 0, time.monotonic() - t0
        if held == 0:
            break
        if time.monotonic() - said >= 5:   # progress: how many keys are left, and how slow the workers answer
            said = time.monotonic()
            log(f"shutdown: {held} key(s) still held after {said - t0:.1f} s (the workers answered in "
                 f"{said - asked:.1f} s)")
        time.sleep(poll)
    return held, time.monotonic() - t0


def shutdown(client, cluster, timeout: float, notes: list[str], drain_timeout: float | None = None) -> None:
    """Let the workers drop their data (at most drain_timeout), then close the client, then the
    cluster, each bounded by timeout; what goes wrong is a note, never an exception."""
    drain_timeout = timeout if drain_timeout is None else drain_timeout
    if client is not None:
        try:
            held, waited = bounded(lambda: drain(client, drain_timeout), drain_timeout + CLOSE_SLACK,
                                   "draining the workers")
            log(f"shutdown: workers drained in {waited:.1f} s" + (f", {held} key(s) still held" if held else ""))
            if held:
                notes.append(f"shutdown: {held} key(s) still held after {waited:.1f} s of draining (--drain-timeout "
                             f"{drain_timeout:g}): the workers were closed with data on them")
        except Exception as err:  # noqa: BLE001
            log(f"shutdown: draining the workers failed: {type(err).__name__}: {err}")
    for what, obj in (("client", client), ("cluster", cluster)):
        if obj is None:
            continue
        try:
            bounded(lambda obj=obj: obj.close(timeout=timeout), timeout + CLOSE_SLACK, f"closing the {what}")
        except Unfinished:
            notes.append(f"shutdown: closing the {what} did not finish within {timeout + CLOSE_SLACK:g} s "
                         "(--close-timeout); its worker processes are stopped before exit")
        except Exception as err:  # noqa: BLE001
            notes.append(f"shutdown: closing the {what} failed: {type(err).__name__}: {err}")


@contextmanager
def cluster_session(make_cluster, n_workers: int, worker_timeout: float, close_timeout: float, notes: list[str],
                    make_client=None, drain_timeout: float | None = None):
    """A cluster and a client with n_workers joined, within worker_timeout seconds all told, else
    NoWorker; closed (bounded, problems as notes) however the body ends. Yields the client."""
    make_client = make_client or _client_for
    deadline = time.monotonic() + worker_timeout
    start = StartWatch()
    try:
        cluster = bounded(make_cluster, worker_timeout, "starting the cluster",
                          on_late=lambda c: _close_quietly(c, close_timeout), watch=start.check)
    except WorkerDiedAtStart:
        raise
    except Unfinished:
        raise NoWorker(f"no worker started within {worker_timeout:g} s (--worker-timeout): the cluster was still "
                       "starting its worker (stuck creating a CUDA context, importing a module, or killed and "
                       "restarted?)") from None
    except Exception:
        start.check()   # distributed's "Nanny failed to start.": say which worker died and how
        raise
    client = None
    try:
        try:
            client = bounded(lambda: make_client(cluster, worker_timeout), worker_timeout, "connecting the client")
        except Unfinished:
            raise NoWorker(f"the client did not connect to the scheduler within {worker_timeout:g} s") from None
        try:
            wait_for_workers(client, n_workers, deadline)
        except NoWorker as err:
            raise NoWorker(f"no worker started within {worker_timeout:g} s (--worker-timeout): {err}") from None
        yield client
    finally:
        shutdown(client, cluster, close_timeout, notes, drain_timeout)


class SpillDiskFull(RuntimeError):
    """The spill directory ran out of room (ENOSPC): dask keeps the data in memory and pauses."""


FULL_BELOW = 16 * 2**20  # free bytes in the spill dir below which a spill cannot go on


def spill_room(path: str | None) -> int | None:
    try:
        vfs = os.statvfs(path) if path else None
    except OSError:
        return None
    return vfs.f_bavail * vfs.f_frsize if vfs else None


def wait_until_held(collection, timeout: float, spill_dir: str | None = None) -> None:
    """Wait until every piece is held. A worker that dies meanwhile (its nanny restarts it and the
    lost pieces are recomputed, possibly forever), no worker at all, a piece that erred, or a spill
    dir that filled up (dask then keeps the data in memory and pauses: a hang until the timeout)
    fails the wait at once."""
    from distributed import futures_of, get_client, wait

    client = get_client()
    workers = set(client.scheduler_info()["workers"])
    if not workers:
        raise NoWorker("no worker is connected to the scheduler: nothing can hold the data")
    futures = futures_of(collection)
    if not futures:                      # nothing to watch: a plain wait with the deadline
        wait(collection, timeout=timeout)
        return

    wait_held(futures, timeout, watcher(client, workers, spill_dir))


def watcher(client, workers: set, spill_dir: str | None):
    """What the wait checks once a second: every worker still there, room left in the spill dir."""
    def check() -> None:
        gone = workers - set(client.scheduler_info()["workers"])
        if gone:
            raise WorkerDied(f"worker {sorted(gone)[0]} died while holding data (OOM-killed?) and was restarted")
        room = spill_room(spill_dir)
        if room is not None and room < FULL_BELOW:
            raise SpillDiskFull(f"the spill dir {spill_dir} is full ({room:,} bytes free): spilling fails with "
                                "ENOSPC and the workers keep the data in memory; give the spill mount more room")
    return check


def wait_held(futures, timeout: float, each_second=lambda: None, late: str = "") -> None:
    """Wait until every future finished, looking once a second: an erred future raises its error
    at once, `each_second()` may raise (a worker gone) or watch, and past `timeout` TimeoutError(late)."""
    from distributed import wait

    deadline = time.monotonic() + timeout
    while True:
        try:
            wait(futures, timeout=1)
            break
        except TimeoutError:
            pass
        erred = [f for f in futures if f.status == "error"]
        if erred:
            erred[0].result()
        each_second()
        if time.monotonic() > deadline:
            raise TimeoutError(late)
    for future in futures:
        if future.status != "finished":
            future.result(timeout=timeout)


class StartWatch:
    """The worker processes a cluster's start makes (multiprocessing children: a LocalCluster's
    nannies spawn them), so that one that exits before the start returned is said at once, with
    its exit code, instead of the start being waited out to --worker-timeout."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.before = set(multiprocessing.active_children())
        self.seen: set = set()

    def check(self) -> None:
        # multiprocessing's own registry, read without its cleanup: active_children() drops (joins)
        # a child that already exited, and a worker dying at once would never be seen
        self.seen |= set(multiprocessing.process._children) - self.before   # noqa: SLF001
        dead = sorted((p for p in self.seen if p.exitcode is not None), key=lambda p: p.pid or 0)
        if dead:
            p = dead[0]
            code = f"signal {-p.exitcode}" if p.exitcode < 0 else f"code {p.exitcode}"
            raise WorkerDiedAtStart(
                f"a worker process exited with {code} {time.monotonic() - self.t0:.1f} s into the cluster's start, "
                "before it joined: the worker died at once (its nanny failed to start it; its log above says why"
                + (", a kill: OOM?" if p.exitcode < 0 else "") + ")")


def describe(err: BaseException, timeout: float) -> str:
    name = type(err).__name__
    if isinstance(err, NoWorker):
        return f"NoWorker: {err}"
    if isinstance(err, WorkerDiedAtStart):
        return f"WorkerDied: {err}"
    if isinstance(err, SpillDiskFull):
        return f"ENOSPC: {err}"
    if name in ("KilledWorker", "WorkerDied"):
        return f"KilledWorker: a worker died holding the data (OOM-killed?): {err}"
    if isinstance(err, TimeoutError) or "Timeout" in name:
        return f"timed out after {timeout:.0f} s (workers paused or killed and restarted?)"
    return f"{name}: {err}"


def reap_children(before: set, timeout: float, notes: list[str]) -> None:
    """Stop the processes this run started and left behind (a worker whose close gave up): exit
    would otherwise wait on them (multiprocessing joins its children at exit)."""
    left = [c for c in multiprocessing.active_children() if c not in before]
    for child in left:
        child.terminate()
    deadline = time.monotonic() + timeout
    for child in left:
        child.join(max(0.1, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(1)
    if left:
        notes.append(f"shutdown: stopped {len(left)} worker process(es) left running: "
                     f"{', '.join(str(c.pid) for c in left)}")


# how long the interpreter's own shutdown may take after the report (set from --close-timeout)
_EXIT = {"grace": DEFAULT_CLOSE_TIMEOUT}


def begin(grace: float) -> None:
    """A fresh run: nothing left running yet, and exit waits at most `grace` s after the report."""
    ABANDONED.clear()
    _EXIT["grace"] = grace


def _force_exit(grace: float, code: int) -> None:
    time.sleep(grace)
    log(f"exit still not done {grace:g} s after the report (threads or processes left by the cluster): forcing it")
    os._exit(code)


def finish(code: int) -> None:
    """Exit with `code`, never hanging: at once when something was left running, else the normal
    way with a daemon watchdog that forces the exit after the grace time."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    if ABANDONED:
        os._exit(code)
    threading.Thread(target=_force_exit, args=(_EXIT["grace"], code), name="rapids-smoke: exit watchdog",
                     daemon=True).start()
    sys.exit(code)
