"""The cluster smoke with real containers (dockerd 20.10, cgroup v1 here): a scheduler and two
worker containers, 1 GiB each (dask --memory-limit 640 MiB, the doctor's derivation), on one
internal network; 1.25 GiB of data (the default: twice one worker's limit) spills on both workers and is
shuffled between them; the result is exact, nobody is OOM-killed, nothing is left behind. A
worker docker-killed mid-shuffle is reported as such and the job ends exactly on the other (or
fails saying why) in bounded time; a worker the kernel OOM-kills (spilling off, doctor off) fails
the run as an OOM kill although its container keeps running.
"""

from __future__ import annotations

import json
import time

import pytest

from rapidship.engine import ENGINE
from rapidship.records import ClusterSmokeRecord, load
from rapidship.runtime.cluster import total_sum
from rapidship.smoke.cluster import LABEL
from rapidship.smoke.run import hardened_flags
from support.commands import CPU_VARIANT, invoke

pytestmark = pytest.mark.docker

MiB, GiB = 2**20, 2**30
SIZES = ["--memory", "1g"]       # --memory-limit and --data by default: 640 MiB each, 1.25 GiB in all
NO_SPILLING = ["--env", "RAPIDS_DOCTOR=off"] + [
    x for k in ("TARGET", "SPILL", "PAUSE", "TERMINATE") for x in ("--env", f"DASK_DISTRIBUTED__WORKER__MEMORY__{k}=False")]


def cluster(out, *args):
    t0 = time.monotonic()
    proc = invoke("smoke", "--variant", CPU_VARIANT, "--cluster", "2", *args, "--out", str(out), check=False)
    wall = time.monotonic() - t0
    (path,) = out.glob(f"{CPU_VARIANT}-amd64-cluster2*-uid*.json")
    record = load(path, ClusterSmokeRecord, "invoke smoke --cluster 2")   # the record reads back typed
    return proc, record, wall


@pytest.fixture(scope="module")
def run(cpu_image, tmp_path_factory):
    out = tmp_path_factory.mktemp("cluster")
    proc, record, wall = cluster(out, *SIZES)
    print(f"cluster smoke: {wall:.1f} s wall, job {record.job_seconds}")
    return proc, record, out


def assert_left_nothing(record, out):
    name = record.network.removesuffix("-net")
    assert ENGINE.containers_labelled(f"{LABEL}={name}") == []
    assert ENGINE.inspect_network(record.network) == {}
    assert not (out / "spill" / name).exists()


def test_two_capped_workers_spill_and_shuffle_with_an_exact_result(run):
    proc, r, _ = run
    assert proc.returncode == 0, proc.stderr
    assert r.verdict == "PASS" and r.problems == []
    side = r.report["shape"][0]
    assert r.result_exact and r.got == r.expected == total_sum(side)
    assert r.memory_limit == 640 * MiB and r.data_bytes > 2 * r.memory_limit * 0.99   # 2x one worker's limit
    assert set(r.tiers) == {"persisted", "shuffled"}
    for phase, rows in r.tiers.items():
        assert len(rows) == 2
        for row in rows:          # every worker spilled, in both phases, to files in its own spill dir
            assert row.disk_keys > 0 and row.disk_bytes > 0 and row.spill_files > 0, (phase, row)
            assert row.memory_bytes <= r.memory_limit and row.oom_kills == 0
    assert all(row.sent_bytes > 0 for row in r.tiers["shuffled"])          # data moved both ways
    workers = [c for c in r.containers if c.role == "worker"]
    assert all(c.spill_peak_files > 0 and c.spill_peak_bytes > 0 for c in workers)   # seen from the host too
    assert not any(c.oom_killed or c.oom_events for c in r.containers)
    assert [c.exit_code for c in r.containers] == [None, None, None, 0]   # scheduler and workers ran to the end
    assert "per-worker tiers" in proc.stderr and "PASS" in proc.stderr


def test_every_container_runs_hardened_on_the_internal_network_only(run):
    _, r, _ = run
    assert r.network_internal
    for c in r.containers:
        argv = r.argv[c.name]
        assert c.networks == [r.network] and c.published_ports == 0
        cap = str(c.memory_bytes)
        assert argv[argv.index("--memory") + 1] == cap == argv[argv.index("--memory-swap") + 1]
        assert "--read-only" in argv and argv[argv.index("--cap-drop") + 1] == "ALL"
        assert argv[argv.index("--user") + 1] == f"{r.uid}:0" and r.uid == 1001
        assert ("--volume" in argv) == (c.role == "worker")
    assert r.memory_bytes == GiB and r.service_memory_bytes == GiB


def test_the_cluster_leaves_no_container_network_or_spill_dir(run):
    _, r, out = run
    assert_left_nothing(r, out)
    assert not [n for n in r.notes if "could not be removed" in n]


def test_the_internal_network_reaches_no_other_network(cpu_image, unique_name):
    """A container on the cluster's kind of network (--internal, made by the same engine call)
    cannot open a connection to a server on another network of ours; the same probe from that
    other network can (the probe works)."""
    inside, other = f"{unique_name}-int", f"{unique_name}-other"
    server = f"{unique_name}-server"
    listen = ("import socket; s = socket.socket(); s.bind(('0.0.0.0', 8080)); s.listen(); "
              "[s.accept()[0].close() for _ in iter(int, 1)]")
    probe = ("import socket, sys; s = socket.socket(); s.settimeout(3)\n"
             "try:\n    s.connect((sys.argv[1], 8080)); print('connected')\n"
             "except OSError as e:\n    print('refused:', type(e).__name__)")
    profile = lambda net: hardened_flags(768 * MiB, 64 * MiB, 1001, 16 * MiB, 8 * MiB, network=net)  # noqa: E731
    try:
        ENGINE.create_network(inside, internal=True, labels={LABEL: unique_name})
        ENGINE.create_network(other, internal=False, labels={LABEL: unique_name})
        assert ENGINE.inspect_network(inside)["Internal"] is True
        ENGINE.run_detached(["--name", server, *profile(other), cpu_image.ref, "python", "-c", listen], server)
        ip = ENGINE.inspect_container(server)["NetworkSettings"]["Networks"][other]["IPAddress"]
        results = {}
        for net in (inside, other):
            proc = ENGINE.run_container(["--rm", *profile(net), "--env", "RAPIDS_DOCTOR=off", cpu_image.ref,
                                         "python", "-c", probe, ip], timeout=60)
            results[net] = proc.stdout.strip()
        assert results[other] == "connected"
        assert results[inside].startswith("refused:"), results
    finally:
        ENGINE.remove_container(server)
        for net in (inside, other):
            ENGINE.remove_network(net)
    assert ENGINE.inspect_network(inside) == {} and ENGINE.inspect_network(other) == {}


def test_a_worker_killed_mid_shuffle_is_reported_and_never_gives_a_wrong_answer(cpu_image, tmp_path):
    proc, r, wall = cluster(tmp_path, *SIZES, "--kill-worker")
    victim = next(c for c in r.containers if c.killed_by_smoke)
    assert r.killed == victim.name and r.killed_after_s is not None
    assert victim.role == "worker" and victim.exit_code == 137 and not victim.oom_killed
    assert any(n.startswith(f"docker kill {victim.name}") for n in r.notes)
    assert wall < 600                                  # bounded: never a hang
    if r.verdict == "PASS":       # dask recomputed the lost blocks on the survivor: exact, nobody else died
        assert proc.returncode == 0 and r.result_exact and r.got == r.expected
        assert r.report["workers_lost"] == [victim.name] and victim.name not in r.report["workers_at_end"]
    else:                         # or a clear reason, never a wrong result
        assert proc.returncode == 1 and r.problems and r.got in (None, r.expected)
        assert any(p.startswith("the job failed: ") for p in r.problems), r.problems
    assert_left_nothing(r, tmp_path)


def test_a_worker_oom_killed_inside_its_running_container_fails_the_run(cpu_image, tmp_path):
    """Spilling off and the preflight skipped: the kernel kills the nanny's worker process, the
    container itself runs on (State.OOMKilled stays false); the engine's OOM event names it."""
    proc, r, wall = cluster(tmp_path, "--memory", "1g", "--data", "2g", *NO_SPILLING)
    assert proc.returncode == 1 and r.verdict == "FAIL"
    ooms = [p for p in r.problems if p.startswith("OOM KILL: the kernel killed a process of worker")]
    assert ooms and "running" in ooms[0], r.problems
    assert any(c.oom_events > 0 and c.exit_code is None for c in r.containers if c.role == "worker")
    assert not r.result_exact and wall < 120
    assert_left_nothing(r, tmp_path)
    assert json.loads(json.dumps(r.report))["error"].startswith("WorkerLost")
