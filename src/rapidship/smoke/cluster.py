"""The cluster smoke: a dask scheduler and N worker containers, each capped, spilling to its own
disk, on one internal network; a job that spills on every worker and shuffles between them.

Pure core: `plan_cluster` (flags -> ClusterPlan, every refusal naming its flag), the commands
and `docker run` argv of each container (`container_argv`, the hardened profile of `smoke.run`),
`tiers_from_report` and `judge_cluster` (container states, the job's report -> verdict). Thin
edge: `cluster_smoke` makes the network and the 0700 spill dirs, starts the containers, watches
the job (and docker-kills one worker mid-shuffle with --kill-worker), reads every container's
state, removes containers, network and spill dirs whatever happened, and returns the record.

Containers, all with --memory = --memory-swap, --user UID:0, --read-only, tmpfs /tmp,
no-new-privileges, --cap-drop ALL, the memlock ulimit, and only the cluster's `--internal`
network (no gateway, no published port):

    <name>-scheduler  dask scheduler (alias `scheduler` on the network)
    <name>-worker-<i> dask worker tcp://scheduler:8786 --nworkers 1 --nthreads 1
                      --memory-limit <limit> --local-directory /spill   (its own spill mount)
    <name>-client     python -m rapids_runtime.cluster (runtime/cluster.py): the job and its report
"""

from __future__ import annotations

import math
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from rapidship.engine import ENGINE
from rapidship.config.matrix import run_id
from rapidship.errors import ConfigError, GateFailure, RapidshipError
from rapidship.records import ClusterContainer, ClusterSmokeRecord, ClusterTiers, save
from rapidship.runtime.rules import HEADROOM_MIN, MIN_WORKER_MEMORY, cap_for_limit, headroom, worker_limit_for
from rapidship.runtime.spill_view import dir_usage
from rapidship.smoke import scrape
from rapidship.smoke.run import OOM_EXIT, _last_json, hardened_flags, make_spill_dir, parse_size

SCHEDULER_ALIAS = "scheduler"
SCHEDULER_PORT = 8786
PHASE = "rapids-cluster: phase "      # the job's progress lines (runtime/cluster.py)
LABEL = "io.rapidship.smoke.cluster"  # on every container and the network: cleanup finds them by it
MAX_WORKERS = 16
MiB = 2**20
# Every container of the cluster: the job's module must import on the workers (their tasks name
# it), and spilled bytes are the bytes written (no compression), so the disk tier reads true.
CLUSTER_ENV = {"PYTHONPATH": "/opt/rapidship",
               "DASK_DISTRIBUTED__WORKER__MEMORY__SPILL_COMPRESSION": "False",
               "DASK_DISTRIBUTED__COMM__COMPRESSION": "False"}
# The scheduler and the client have no spill mount; their scratch space is the tmpfs.
SERVICE_ENV = {"DASK_TEMPORARY_DIRECTORY": "/tmp"}


@dataclass(frozen=True)
class ClusterPlan:
    variant: str
    arch: str
    ref: str
    uid: int
    workers: int
    memory_bytes: int                  # each worker's --memory (= --memory-swap)
    memory_limit: int                  # each worker's dask --memory-limit
    service_memory_bytes: int          # the scheduler's and the client's --memory
    data_bytes: int
    shm_bytes: int
    name: str                          # prefix of every container, the network and the spill dirs
    spill_root: str                    # host dir holding one 0700 spill dir per worker
    kill_worker: bool = False
    chunk_bytes: int = 64 * MiB
    env: dict[str, str] = field(default_factory=dict)
    memlock: int | None = None         # None: unlimited (-1), the profile's ask
    notes: tuple[str, ...] = ()
    tmpfs_bytes: int = 64 * MiB
    timeout_s: float = 900             # the whole job; then everything is stopped: a hang is a failure
    step_timeout_s: float = 420        # each step of the job (persist, shuffle, check)
    start_timeout_s: float = 120       # connect and see every worker
    kill_after_s: float = 3.0          # --kill-worker: seconds into the shuffle
    metrics: bool = False              # --metrics: /metrics on every worker and the scheduler, scraped
    metrics_targets: str | None = None  # --metrics-targets: where to write Prometheus file_sd for them
    scrape_every_s: float = 1.0
    metrics_linger_s: float = 60.0     # --metrics-linger: the most the cluster waits for that Prometheus

    @property
    def network(self) -> str:
        return f"{self.name}-net"

    @property
    def scheduler(self) -> str:
        return f"{self.name}-scheduler"

    @property
    def client(self) -> str:
        return f"{self.name}-client"

    def worker(self, i: int) -> str:
        return f"{self.name}-worker-{i}"

    @property
    def worker_names(self) -> list[str]:
        return [self.worker(i) for i in range(self.workers)]

    @property
    def victim(self) -> str | None:
        """The worker --kill-worker kills: the last one."""
        return self.worker(self.workers - 1) if self.kill_worker else None

    def spill_dir(self, i: int) -> Path:
        return Path(self.spill_root) / self.worker(i)


def _mib(n: int) -> str:
    return f"{n / MiB:.0f} MiB"


def plan_cluster(variant, arch: str, workers, uid: int, memory: str, memory_limit: str | None, data: str | None,
                 shm: str, spill_root: Path, kill_worker: bool = False, image: str | None = None,
                 env: dict | None = None, service_memory: str = "1g", chunk: str | None = None,
                 metrics: bool = False, metrics_targets: str | None = None,
                 metrics_linger: int | None = None) -> ClusterPlan:
    """Pure: what to run; a ConfigError naming the flag for anything that cannot work."""
    try:
        n = int(workers)
    except (TypeError, ValueError):
        raise ConfigError("--cluster", f"{workers!r} is not a whole number", "pass --cluster 2") from None
    if not 1 <= n <= MAX_WORKERS:
        raise ConfigError("--cluster", f"{n} workers: a cluster smoke runs 1 to {MAX_WORKERS} worker containers",
                          "pass --cluster 2 (or 3)")
    if kill_worker and n < 2:
        raise ConfigError("--kill-worker", f"with --cluster {n} no worker is left to finish the job",
                          "pass --cluster 2 or more with --kill-worker")
    cap = parse_size(memory, "--memory")
    least = MIN_WORKER_MEMORY + HEADROOM_MIN
    if cap < least:
        raise ConfigError("--memory", f"{_mib(cap)} per worker container: rapids-doctor refuses a container below "
                          f"{_mib(least)} ({_mib(MIN_WORKER_MEMORY)} for the worker + {_mib(HEADROOM_MIN)} headroom)",
                          f"pass --memory {least // MiB}m or more")
    fit = worker_limit_for(cap)
    if memory_limit in (None, ""):
        limit = fit
    else:
        limit = parse_size(memory_limit, "--memory-limit")
        if limit < MIN_WORKER_MEMORY:
            raise ConfigError("--memory-limit", f"{_mib(limit)}: a worker needs at least {_mib(MIN_WORKER_MEMORY)} "
                              "to hold a block and its spill bookkeeping", f"pass --memory-limit {MIN_WORKER_MEMORY // MiB}m or more")
        if limit > fit:
            need = cap_for_limit(limit)
            raise ConfigError("--memory", f"{_mib(cap)} is too small for --memory-limit {_mib(limit)}: it leaves "
                              f"{_mib(fit)} for the worker after {_mib(headroom(cap))} headroom (nanny, interpreter, "
                              "page cache), and a worker above that is OOM-killed before it spills",
                              f"pass --memory {math.ceil(need / MiB)}m or more, or --memory-limit {fit // MiB}m or less")
    service = parse_size(service_memory, "--service-memory")
    if service < least:
        raise ConfigError("--service-memory", f"{_mib(service)}: rapids-doctor refuses a container below {_mib(least)}",
                          f"pass {least // MiB}m or more")
    data_bytes = parse_size(data, "--data") if data else n * limit
    if data_bytes <= limit:
        raise ConfigError("--data", f"{_mib(data_bytes)} fits one worker's --memory-limit ({_mib(limit)}): no worker "
                          "would need to spill", f"pass --data {math.ceil(n * limit / MiB)}m or leave it out")
    if metrics_targets and not metrics:
        raise ConfigError("--metrics-targets", "names where to list the workers' /metrics, which only --metrics serves",
                          "add --metrics, or leave --metrics-targets out")
    if metrics_linger is not None and not metrics_targets:
        raise ConfigError("--metrics-linger", "is how long to wait for the Prometheus a --metrics-targets file names",
                          "add --metrics --metrics-targets FILE, or leave --metrics-linger out")
    if metrics_linger is not None and not 0 <= metrics_linger <= 3600:
        raise ConfigError("--metrics-linger", f"{metrics_linger} s: wait 0 to 3600 seconds for a Prometheus",
                          "pass at least its scrape interval (and file_sd refresh), e.g. --metrics-linger 60")
    chunk_bytes = parse_size(chunk, "--chunk") if chunk else min(64 * MiB, max(4 * MiB, limit // 10))
    name = f"rapidship-cluster-{uuid.uuid4().hex[:8]}"
    return ClusterPlan(variant=variant.id, arch=arch, ref=image or variant.local_ref(arch, run_id()), uid=uid, workers=n,
                       memory_bytes=cap, memory_limit=limit, service_memory_bytes=service, data_bytes=data_bytes,
                       shm_bytes=parse_size(shm, "--shm-size"), name=name, spill_root=str(spill_root / name),
                       kill_worker=bool(kill_worker), chunk_bytes=chunk_bytes, env=dict(env or {}),
                       metrics=bool(metrics), metrics_targets=str(metrics_targets) if metrics_targets else None,
                       **({"metrics_linger_s": float(metrics_linger)} if metrics_linger is not None else {}))


# ---- commands and run profiles (pure) ----

def scheduler_address() -> str:
    return f"tcp://{SCHEDULER_ALIAS}:{SCHEDULER_PORT}"


def scheduler_command(metrics: bool = False) -> list[str]:
    http = ["--dashboard-address", f":{scrape.SCHEDULER_PORT}"] if metrics else ["--no-dashboard"]
    return ["dask", "scheduler", "--port", str(SCHEDULER_PORT), *http]


def worker_command(plan: ClusterPlan, i: int) -> list[str]:
    """With --metrics the worker's HTTP server serves /metrics (on the internal network only) and
    the preload adds the container's views to it."""
    http = ["--dashboard-address", f":{scrape.WORKER_PORT}", "--preload", "rapids_runtime.metrics"] if plan.metrics \
        else ["--no-dashboard"]
    return ["dask", "worker", scheduler_address(), "--name", plan.worker(i), "--nworkers", "1", "--nthreads", "1",
            "--memory-limit", str(plan.memory_limit), "--local-directory", "/spill", *http]


def client_command(plan: ClusterPlan) -> list[str]:
    return ["python", "-m", "rapids_runtime.cluster", "--scheduler", scheduler_address(),
            "--workers", str(plan.workers), "--data-bytes", str(plan.data_bytes),
            "--chunk-bytes", str(plan.chunk_bytes), "--timeout", f"{plan.step_timeout_s:g}",
            "--worker-timeout", f"{plan.start_timeout_s:g}", *(["--allow-worker-loss"] if plan.kill_worker else [])]


def container_argv(plan: ClusterPlan, role: str, i: int = 0) -> list[str]:
    """Pure: `docker run` flags, image and command of one container (after `docker run --detach`)."""
    if role == "worker":
        name, cap, spill, command = plan.worker(i), plan.memory_bytes, str(plan.spill_dir(i)), worker_command(plan, i)
        env = {**CLUSTER_ENV, **plan.env}
    elif role in ("scheduler", "client"):
        name, cap, spill = (plan.scheduler if role == "scheduler" else plan.client), plan.service_memory_bytes, None
        command = scheduler_command(plan.metrics) if role == "scheduler" else client_command(plan)
        env = {**CLUSTER_ENV, **SERVICE_ENV, **plan.env}
    else:
        raise ValueError(role)
    alias = ["--network-alias", SCHEDULER_ALIAS] if role == "scheduler" else []
    return ["--name", name, "--hostname", name, "--label", f"{LABEL}={plan.name}", "--label", f"{LABEL}.role={role}",
            *hardened_flags(cap, plan.shm_bytes, plan.uid, plan.tmpfs_bytes, plan.memlock, network=plan.network,
                            spill_host_dir=spill, env=env),
            *alias, plan.ref, *command]


def all_argv(plan: ClusterPlan, cli: str = "docker") -> dict[str, list[str]]:
    """Pure: every container's full command line, by container name."""
    out = {plan.scheduler: container_argv(plan, "scheduler")}
    out.update({plan.worker(i): container_argv(plan, "worker", i) for i in range(plan.workers)})
    out[plan.client] = container_argv(plan, "client")
    return {name: [cli, "run", "--detach", *argv] for name, argv in out.items()}


# ---- the verdict (pure) ----

def tiers_from_report(report: dict | None) -> dict[str, list[ClusterTiers]]:
    """Pure: the job's per-worker views, phase by phase, as typed rows."""
    out: dict[str, list[ClusterTiers]] = {}
    for phase, views in ((report or {}).get("phases") or {}).items():
        out[phase] = [ClusterTiers(worker=name, memory_keys=v["memory"][0], memory_bytes=v["memory"][1],
                                   disk_keys=v["disk"][0], disk_bytes=v["disk"][1], spill_files=v["spill_files"],
                                   spill_file_bytes=v["spill_file_bytes"], sent_bytes=v["sent_bytes"],
                                   rss_peak_bytes=v["rss_peak"], oom_kills=v.get("oom_kills"))
                      for name, v in sorted(views.items())]
    return out


def judge_cluster(plan: ClusterPlan, containers: list[ClusterContainer], report: dict | None,
                  client_exit: int | None, timed_out: bool, killed: str | None, internal: bool,
                  logs: dict[str, str] | None = None) -> list[str]:
    """Pure: why the cluster smoke fails (empty = PASS).

    An OOM kill anywhere (the engine's flag, exit 137 that the smoke did not cause, or a worker
    cgroup's OOM count), a scheduler or worker that died without being killed, a job that hung,
    a kill that did not happen, a container on another network or with a published port, no
    report, and every problem the job found (no spill on a worker, no shuffle, a wrong result,
    a failed step) each fail the run with their own sentence."""
    problems: list[str] = []
    logs = logs or {}
    if timed_out:
        problems.append(f"the job did not finish within {plan.timeout_s:g} s: everything was stopped (a hang)")
    if not internal:
        problems.append(f"network {plan.network} is not internal: the cluster could reach outside")
    for c in containers:
        last = " | ".join(logs.get(c.name, "").strip().splitlines()[-2:])
        if c.oom_killed or (c.exit_code == OOM_EXIT and not c.killed_by_smoke):
            what = "running" if c.exit_code is None else f"exit {c.exit_code}"
            problems.append(f"OOM KILL: the kernel killed a process of {c.role} {c.name} for memory ({what}, "
                            f"{c.oom_events} OOM event(s), --memory {_mib(c.memory_bytes)}): it did not spill in time")
        elif c.role in ("scheduler", "worker") and c.exit_code is not None and not c.killed_by_smoke:
            problems.append(f"{c.role} {c.name} exited {c.exit_code} during the job: {last or 'no log'}")
        if c.networks and c.networks != [plan.network]:
            problems.append(f"{c.name} is on {', '.join(c.networks)}, not only on {plan.network}")
        if c.published_ports:
            problems.append(f"{c.name} publishes {c.published_ports} port(s): the cluster must expose none")
    if plan.kill_worker and not killed:
        problems.append("--kill-worker: no worker was killed: the job ended before its shuffle was under way")
    problems += metrics_problems(plan, containers)
    for phase, rows in tiers_from_report(report).items():
        for row in rows:
            if row.oom_kills:
                problems.append(f"OOM KILL inside worker {row.worker}: its memory cgroup counted {row.oom_kills} "
                                f"OOM kill(s) by the {phase} phase")
    if report is None:
        if not timed_out:
            tail = " | ".join(logs.get(plan.client, "").strip().splitlines()[-3:])
            problems.append(f"no JSON report from the client (exit {client_exit}): {tail or 'no log'}")
    else:
        problems += report.get("problems", [])
        if report.get("verdict") != "PASS" and not report.get("problems"):
            problems.append(f"the job's report says {report.get('verdict')}")
    if client_exit not in (0, None) and not problems:
        problems.append(f"the client exited {client_exit}")
    seen: set[str] = set()
    return [p for p in problems if not (p in seen or seen.add(p))]


def metrics_problems(plan: ClusterPlan, containers: list[ClusterContainer]) -> list[str]:
    """Pure: --metrics asked for every worker's /metrics; one that never answered fails the run (a
    monitoring stack would see nothing of it), and the OOM kills its cgroup counted are OOM kills."""
    if not plan.metrics:
        return []
    problems = []
    for c in containers:
        if c.role != "worker":
            continue
        m = c.metrics
        if m is None or m.scrapes == 0:
            why = (m.last_error if m else None) or "no address on the network"
            problems.append(f"--metrics: worker {c.name}'s /metrics never answered "
                            f"({m.failures if m else 0} tries; last: {why})")
        elif m.highest.get(scrape.OOM_KILLS, 0) > 0:
            problems.append(f"OOM KILL inside worker {c.name}: its /metrics counted "
                            f"{m.highest[scrape.OOM_KILLS]:.0f} oom_kill(s) in its cgroup")
    return problems


# ---- edge ----

def _container_record(plan: ClusterPlan, name: str, role: str, killed: str | None, peaks: dict,
                      ooms: list[str], scraped: dict[str, scrape.Scraped]) -> ClusterContainer:
    info = ENGINE.inspect_container(name)
    state = info.get("State", {})
    running = bool(state.get("Running"))
    ports = (info.get("HostConfig") or {}).get("PortBindings") or {}
    nets = sorted(((info.get("NetworkSettings") or {}).get("Networks") or {}).keys())
    files, nbytes = peaks.get(name, (0, 0))
    return ClusterContainer(name=name, role=role,
                            memory_bytes=plan.memory_bytes if role == "worker" else plan.service_memory_bytes,
                            exit_code=None if running or not state else state.get("ExitCode"),
                            oom_killed=bool(state.get("OOMKilled")) or name in ooms, oom_events=ooms.count(name),
                            killed_by_smoke=name == killed,
                            networks=nets, published_ports=sum(len(v or []) for v in ports.values()),
                            spill_peak_files=files, spill_peak_bytes=nbytes,
                            metrics=scraped[name].record() if name in scraped else None)


def _poll_spill(plan: ClusterPlan, peaks: dict) -> None:
    for i in range(plan.workers):
        files, nbytes = dir_usage(str(plan.spill_dir(i)))
        old = peaks.get(plan.worker(i), (0, 0))
        peaks[plan.worker(i)] = (max(old[0], files), max(old[1], nbytes))


def _address(plan: ClusterPlan, name: str) -> str | None:
    net = (((ENGINE.inspect_container(name).get("NetworkSettings") or {}).get("Networks") or {})
           .get(plan.network) or {})
    return net.get("IPAddress") or None


def start_scrapes(plan: ClusterPlan) -> dict[str, scrape.Scraped]:
    """--metrics: every worker's /metrics on its internal address (the host reaches the network's
    bridge; nothing is published), and the file_sd file naming them for a Prometheus."""
    if not plan.metrics:
        return {}
    endpoints = {plan.scheduler: ("scheduler", _address(plan, plan.scheduler), scrape.SCHEDULER_PORT)}
    endpoints.update({w: ("worker", _address(plan, w), scrape.WORKER_PORT) for w in plan.worker_names})
    if plan.metrics_targets:
        scrape.targets_file(Path(plan.metrics_targets), plan.name,
                            {n: (role, f"{ip}:{port}") for n, (role, ip, port) in endpoints.items() if ip})
    return {n: scrape.Scraped(f"{ip}:{port}" if ip else "") for n, (role, ip, port) in endpoints.items()
            if role == "worker"}


def _scrape_all(scraped: dict[str, scrape.Scraped]) -> None:
    for s in scraped.values():
        if s.target:
            scrape.fetch(s)
        else:
            s.failed("the container had no address on the cluster's network")


def final_scrapes(plan: ClusterPlan, scraped: dict[str, scrape.Scraped], clock, sleep, grace_s: float = 15.0) -> list[str]:
    """After the job: one answer more from every worker still running (a worker the kernel
    OOM-killed comes back under its nanny within seconds, and only then shows the kill it counted).
    Where --metrics-targets told a Prometheus of the workers, the cluster then stays up until each
    worker has counted a scrape by someone else since those end values (its
    rapidship_metrics_scrapes_total less the smoke's own), at most --metrics-linger seconds: a
    slow discovery or a missed scrape no longer loses the kill. Returns notes."""
    if not scraped:
        return []
    pending = {n: s.scrapes for n, s in scraped.items() if s.target and ENGINE.container_state(n).get("Running")}
    answered = set(pending)
    deadline = clock() + grace_s
    while pending and clock() < deadline:
        for name in list(pending):
            scrape.fetch(scraped[name])
            if scraped[name].scrapes > pending[name]:
                del pending[name]
        if pending:
            sleep(plan.scrape_every_s)
    if not plan.metrics_targets:
        return []
    waiting = sorted(answered - set(pending))
    for name in waiting:
        scraped[name].mark_end()
    deadline = clock() + plan.metrics_linger_s
    while waiting and clock() < deadline:
        sleep(plan.scrape_every_s)
        for name in list(waiting):
            scrape.fetch(scraped[name])
            if (scraped[name].others_since_end() or 0) > 0:
                waiting.remove(name)
    why = lambda n: ("its /metrics counts no scrapes (an image built before rapidship_metrics_scrapes_total)"  # noqa: E731
                     if scraped[n].others_since_end() is None else "nothing but the smoke read its /metrics")
    return [f"{n}: {why(n)} in the {plan.metrics_linger_s:g} s after the job: a Prometheus given "
            f"{plan.metrics_targets} may lack its end values (pass --metrics-linger above its scrape interval)"
            for n in waiting]


def cleanup(plan: ClusterPlan) -> list[str]:
    """Remove every container and the network of this cluster, and its spill dirs; what could not be
    removed is a note (never an exception: this runs in a finally)."""
    notes = []
    if plan.metrics and plan.metrics_targets:  # a cluster that is gone is no target: no stale WorkerDown
        scrape.targets_file(Path(plan.metrics_targets), plan.name, {})
    for name in sorted(set(ENGINE.containers_labelled(f"{LABEL}={plan.name}")) |
                       {plan.scheduler, plan.client, *plan.worker_names}):
        ENGINE.remove_container(name)
    if ENGINE.inspect_network(plan.network) and not ENGINE.remove_network(plan.network):
        notes.append(f"network {plan.network} could not be removed")
    shutil.rmtree(plan.spill_root, ignore_errors=True)
    if Path(plan.spill_root).exists():
        notes.append(f"spill dirs under {plan.spill_root} could not be removed")
    return notes


def cluster_smoke(plan: ClusterPlan, clock=time.monotonic, sleep=time.sleep) -> ClusterSmokeRecord:
    if not ENGINE.exists(plan.ref):
        raise RapidshipError(f"image {plan.ref}", "not in the engine",
                             f"build it: invoke build --variant {plan.variant} --arch {plan.arch}")
    argv = all_argv(plan, ENGINE.cli)
    notes = list(plan.notes)
    killed: str | None = None
    killed_after = None
    timed_out = False
    peaks: dict = {}
    start, wall_start = clock(), time.time() - 1
    try:
        for i in range(plan.workers):
            make_spill_dir(plan.spill_dir(i), plan.uid)
        ENGINE.create_network(plan.network, internal=True, labels={LABEL: plan.name})
        for name, full in argv.items():
            ENGINE.run_detached(full[3:], name)
        scraped = start_scrapes(plan)
        last_scrape = -math.inf
        deadline = start + plan.timeout_s
        shuffle_seen = None
        while True:
            state = ENGINE.container_state(plan.client)
            _poll_spill(plan, peaks)
            if scraped and clock() - last_scrape >= plan.scrape_every_s:
                last_scrape = clock()
                _scrape_all(scraped)
            if not state.get("Running"):
                break
            if not ENGINE.container_state(plan.scheduler).get("Running"):
                notes.append("the scheduler stopped while the job ran: the client was stopped")
                ENGINE.kill(plan.client)
                break
            if plan.kill_worker and not killed:
                if shuffle_seen is None and f"{PHASE}shuffle" in ENGINE.logs(plan.client, tail=50)[1]:
                    shuffle_seen = clock()
                if shuffle_seen is not None and clock() - shuffle_seen >= plan.kill_after_s:
                    ENGINE.kill(plan.victim)
                    killed, killed_after = plan.victim, round(clock() - start, 1)
                    notes.append(f"docker kill {plan.victim} {killed_after} s into the run, "
                                 f"{clock() - shuffle_seen:.1f} s into the shuffle")
            if clock() > deadline:
                timed_out = True
                ENGINE.kill(plan.client)
                break
            sleep(0.5)
        notes += final_scrapes(plan, scraped, clock, sleep)
        seconds = round(clock() - start, 1)
        client_state = ENGINE.container_state(plan.client)
        stdout, stderr = ENGINE.logs(plan.client)
        logs = {plan.client: "\n".join(stderr.strip().splitlines()[-30:])}
        for name in (plan.scheduler, *plan.worker_names):
            out, err = ENGINE.logs(name, tail=30)
            logs[name] = "\n".join((out + err).strip().splitlines()[-30:])
        roles = [(plan.scheduler, "scheduler"), *((w, "worker") for w in plan.worker_names), (plan.client, "client")]
        ooms = ENGINE.oom_events(f"{LABEL}={plan.name}", wall_start)
        containers = [_container_record(plan, name, role, killed, peaks, ooms, scraped) for name, role in roles]
        internal = bool(ENGINE.inspect_network(plan.network).get("Internal"))
    finally:
        notes += cleanup(plan)
    report = _last_json(stdout)
    client_exit = None if timed_out else client_state.get("ExitCode")
    problems = judge_cluster(plan, containers, report, client_exit, timed_out, killed, internal, logs)
    if report:
        notes += report.get("notes", [])
    return ClusterSmokeRecord(
        variant=plan.variant, arch=plan.arch, ref=plan.ref, uid=plan.uid, workers=plan.workers, network=plan.network,
        network_internal=internal, memory_bytes=plan.memory_bytes, memory_limit=plan.memory_limit,
        service_memory_bytes=plan.service_memory_bytes, data_bytes=(report or {}).get("data_bytes", plan.data_bytes),
        kill_worker=plan.kill_worker, killed=killed, killed_after_s=killed_after, argv=argv, containers=containers,
        tiers=tiers_from_report(report), expected=(report or {}).get("expected"), got=(report or {}).get("got"),
        result_exact=bool((report or {}).get("result_ok")), seconds=seconds,
        job_seconds={k: float(v) for k, v in ((report or {}).get("seconds") or {}).items()},
        verdict="FAIL" if problems else "PASS", problems=problems, notes=notes, report=report, logs_tail=logs,
        metrics_targets=plan.metrics_targets if plan.metrics else None)


def record_path(out_dir: Path, record: ClusterSmokeRecord) -> Path:
    kill = "-kill" if record.kill_worker else ""
    return Path(out_dir) / f"{record.variant}-{record.arch}-cluster{record.workers}{kill}-uid{record.uid}.json"


def write_record(record: ClusterSmokeRecord, out_dir: Path) -> Path:
    return save(record_path(out_dir, record), record)


def raise_on_failure(record: ClusterSmokeRecord, path: Path) -> None:
    if record.verdict != "PASS":
        raise GateFailure(f"cluster smoke {record.variant} ({record.workers} workers"
                          f"{', one killed' if record.kill_worker else ''}, uid {record.uid})",
                          "; ".join(record.problems), f"each problem says what failed; docs/cluster.md says what "
                          f"to change; the record {path} has every container's state and log tail")
