"""Pure parts of the cluster smoke: flag checks, the containers' run profiles and commands, the
host-side verdict (OOM, dead containers, hang, kill, network) and the job's own verdict (no spill
on a worker, no shuffle, wrong result), plus the exact closed forms the job checks against."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rapidship.config.matrix import load_matrix
from rapidship.errors import ConfigError
from rapidship.records import ClusterContainer
from rapidship.runtime import cluster as job
from rapidship.smoke.cluster import (CLUSTER_ENV, LABEL, SCHEDULER_ALIAS, SERVICE_ENV, container_argv, headroom, judge_cluster, plan_cluster,
                                     tiers_from_report, worker_limit_for)
from rapidship.smoke.run import hardened_flags
from support.commands import ROOT

MiB, GiB = 2**20, 2**30


@pytest.fixture(scope="module")
def variant():
    return load_matrix(ROOT / "variants.yaml").get("cpu-debian12")


def plan(variant, workers=2, memory="1g", memory_limit=None, data=None, kill=False, **kw):
    return plan_cluster(variant, "amd64", workers, 1001, memory, memory_limit, data, "256m", Path("/srv/spill"),
                        kill_worker=kill, image="sha256:abc", **kw)


# ---- flags ----

def test_defaults_follow_the_doctors_derivation(variant):
    p = plan(variant)
    assert headroom(GiB) == 384 * MiB and worker_limit_for(GiB) == 640 * MiB
    assert headroom(8 * GiB) == int(8 * GiB * 0.15)
    assert p.memory_limit == 640 * MiB and p.memory_bytes == GiB
    assert p.data_bytes == 2 * 640 * MiB                 # N x limit: each worker holds its whole limit
    assert p.spill_root == f"/srv/spill/{p.name}" and p.spill_dir(1) == Path(p.spill_root) / p.worker(1)
    assert p.victim is None
    k = plan(variant, kill=True)
    assert k.victim == k.worker(1) == f"{k.name}-worker-1"


@pytest.mark.parametrize("kwargs, flag, message", [
    (dict(workers=0), "--cluster", "0 workers"),
    (dict(workers="two"), "--cluster", "'two' is not a whole number"),
    (dict(workers=17), "--cluster", "17 workers"),
    (dict(workers=1, kill=True), "--kill-worker", "no worker is left to finish the job"),
    (dict(memory="512m"), "--memory", "refuses a container below 640 MiB"),
    (dict(memory="768m", memory_limit="512m"), "--memory", "768 MiB is too small for --memory-limit 512 MiB"),
    (dict(memory_limit="100m"), "--memory-limit", "a worker needs at least 256 MiB"),
    (dict(data="600m"), "--data", "fits one worker's --memory-limit (640 MiB)"),
    (dict(memory="lots"), "--memory", "'lots' is not a size"),
])
def test_bad_flags_are_one_error_naming_the_flag(variant, kwargs, flag, message):
    with pytest.raises(ConfigError) as err:
        plan(variant, **kwargs)
    assert err.value.where == flag and message in err.value.problem and err.value.exit_code == 2


def test_a_limit_too_big_for_the_cap_says_what_cap_fits(variant):
    with pytest.raises(ConfigError) as err:
        plan(variant, memory="768m", memory_limit="512m")
    assert "--memory 896m or more" in err.value.fix and "--memory-limit 384m or less" in err.value.fix
    plan(variant, memory="896m", memory_limit="512m")          # the cap it names does fit


# ---- run profiles and commands ----

def test_every_container_runs_the_hardened_profile_on_the_internal_network_only(variant):
    p = replace(plan(variant, kill=True), memlock=8 * MiB)
    for role, i in (("scheduler", 0), ("worker", 0), ("worker", 1), ("client", 0)):
        argv = container_argv(p, role, i)
        cap = p.memory_bytes if role == "worker" else p.service_memory_bytes
        for a, b in (("--memory", str(cap)), ("--memory-swap", str(cap)), ("--network", p.network),
                     ("--security-opt", "no-new-privileges"), ("--cap-drop", "ALL"), ("--user", "1001:0"),
                     ("--ulimit", f"memlock={8 * MiB}:{8 * MiB}")):
            assert argv[argv.index(a) + 1] == b, (role, a)
        assert "--read-only" in argv and argv.count("--network") == 1
        assert not {"-p", "--publish", "--publish-all", "-P", "--privileged"} & set(argv)
        assert f"{LABEL}={p.name}" in argv
        env = {**CLUSTER_ENV, **({} if role == "worker" else SERVICE_ENV)}
        profile = hardened_flags(cap, p.shm_bytes, 1001, p.tmpfs_bytes, 8 * MiB, network=p.network,
                                 spill_host_dir=str(p.spill_dir(i)) if role == "worker" else None, env=env)
        start = argv.index("--memory")
        assert argv[start:start + len(profile)] == profile        # the one profile, not a copy of it


def test_worker_scheduler_and_client_commands(variant):
    p = plan(variant, kill=True)
    w = container_argv(p, "worker", 1)
    assert f"{p.spill_dir(1)}:/spill:rw" in w
    cmd = w[w.index(p.ref) + 1:]
    assert cmd == ["dask", "worker", "tcp://scheduler:8786", "--name", p.worker(1), "--nworkers", "1", "--nthreads",
                   "1", "--memory-limit", str(640 * MiB), "--local-directory", "/spill", "--no-dashboard"]
    s = container_argv(p, "scheduler")
    assert s[s.index("--network-alias") + 1] == SCHEDULER_ALIAS and "--volume" not in s
    assert "DASK_TEMPORARY_DIRECTORY=/tmp" in s and s[s.index(p.ref) + 1:][:2] == ["dask", "scheduler"]
    c = container_argv(p, "client")
    assert "--volume" not in c and "PYTHONPATH=/opt/rapidship" in c
    assert c[c.index(p.ref) + 1:c.index(p.ref) + 4] == ["python", "-m", "rapids_runtime.cluster"]
    assert "--allow-worker-loss" in c and "--allow-worker-loss" not in container_argv(plan(variant), "client")


# ---- the host-side verdict ----

def view(memory=(4, 255 * MiB), disk=(6, 383 * MiB), files=6, sent=0, oom=0):
    return {"memory": list(memory), "disk": list(disk), "spill_files": files, "spill_file_bytes": disk[1],
            "sent_bytes": sent, "rss_peak": 500 * MiB, "oom_kills": oom}


def report(p, **over):
    r = {"phases": {"persisted": {w: view() for w in p.worker_names},
                    "shuffled": {w: view(disk=(19, 1200 * MiB), files=19, sent=300 * MiB) for w in p.worker_names}},
         "data_bytes": p.data_bytes, "memory_limits": {w: p.memory_limit for w in p.worker_names},
         "expected": 10, "got": 10, "result_ok": True, "problems": [], "verdict": "PASS"}
    r.update(over)
    return r


def containers(p, **by_name):
    out = []
    for name, role in [(p.scheduler, "scheduler"), *((w, "worker") for w in p.worker_names), (p.client, "client")]:
        fields = dict(name=name, role=role, memory_bytes=p.memory_bytes, exit_code=0 if role == "client" else None,
                      oom_killed=False, networks=[p.network])
        fields.update(by_name.get(name, {}))
        out.append(ClusterContainer(**fields))
    return out


def judge(p, cs=None, rep="default", exit_code=0, timed_out=False, killed=None, internal=True, logs=None):
    return judge_cluster(p, cs or containers(p), report(p) if rep == "default" else rep, exit_code, timed_out,
                         killed, internal, logs)


def test_a_clean_run_passes_and_its_tiers_are_typed(variant):
    p = plan(variant)
    assert judge(p) == []
    tiers = tiers_from_report(report(p))
    assert [r.worker for r in tiers["shuffled"]] == p.worker_names
    assert tiers["persisted"][0].disk_bytes == 383 * MiB and tiers["shuffled"][1].sent_bytes == 300 * MiB


def test_an_oom_kill_inside_a_running_worker_fails_the_run(variant):
    """The nanny's worker process killed by the kernel: the container runs on, State.OOMKilled stays
    false; the engine's OOM event is what tells."""
    p = plan(variant)
    w = p.worker(0)
    problems = judge(p, containers(p, **{w: dict(oom_killed=True, oom_events=1)}))
    assert problems and problems[0].startswith(f"OOM KILL: the kernel killed a process of worker {w} for memory (running")


def test_exit_137_without_the_smoke_killing_it_is_an_oom_kill_and_with_it_is_not(variant):
    p = plan(variant, kill=True)
    w = p.worker(1)
    assert "OOM KILL" in judge(p, containers(p, **{w: dict(exit_code=137)}), killed=w)[0]
    assert judge(p, containers(p, **{w: dict(exit_code=137, killed_by_smoke=True)}), killed=w) == []


def test_oom_kills_a_worker_counted_in_its_cgroup_fail_the_run(variant):
    p = plan(variant)
    rep = report(p)
    rep["phases"]["shuffled"][p.worker(0)]["oom_kills"] = 2
    assert any("OOM KILL inside worker" in x and "2 OOM kill(s)" in x for x in judge(p, rep=rep))


def test_a_dead_scheduler_or_worker_is_named_with_its_last_log_line(variant):
    p = plan(variant)
    problems = judge(p, containers(p, **{p.scheduler: dict(exit_code=1)}), logs={p.scheduler: "a\nOSError: boom"})
    assert problems == [f"scheduler {p.scheduler} exited 1 during the job: a | OSError: boom"]


def test_a_hang_a_missed_kill_and_a_leaky_network_each_fail(variant):
    p = plan(variant, kill=True)
    assert "did not finish within 900 s" in judge(p, rep=None, exit_code=None, timed_out=True, killed=p.victim)[0]
    assert judge(p)[0].startswith("--kill-worker: no worker was killed")
    assert "is not internal" in judge(p, internal=False, killed=p.victim)[0]
    cs = containers(p, **{p.client: dict(networks=[p.network, "bridge"], published_ports=1)})
    problems = judge(p, cs, killed=p.victim)
    assert any(", bridge, not only on" in x for x in problems) and any("publishes 1 port" in x for x in problems)


def test_no_report_and_the_jobs_own_problems(variant):
    p = plan(variant)
    assert judge(p, rep=None, exit_code=1, logs={p.client: "Traceback\nImportError: x"}) == [
        "no JSON report from the client (exit 1): Traceback | ImportError: x"]
    rep = report(p, problems=["WRONG RESULT: expected 10, got 9"], verdict="FAIL", result_ok=False)
    assert judge(p, rep=rep, exit_code=1) == ["WRONG RESULT: expected 10, got 9"]


# ---- the job's own verdict (runtime/cluster.py, runs in the client container) ----

def test_the_silent_no_spill_case_on_one_worker_is_caught():
    phases = {"persisted": {"w0": view(), "w1": view(memory=(10, 640 * MiB), disk=(0, 0), files=0)},
              "shuffled": {"w0": view(sent=5), "w1": view(memory=(10, 640 * MiB), disk=(0, 0), files=0, sent=5)}}
    problems = job.worker_problems(phases, 1280 * MiB, {"w0": 640 * MiB, "w1": 640 * MiB})
    assert problems == [f"NO SPILL on worker w1: nothing reached its disk tier (0 keys, 0 B, 0 spill files) "
                        f"while it held {640 * MiB} B in memory"]


def test_disk_keys_without_files_in_the_spill_dir_is_no_spill():
    phases = {"persisted": {"w0": view(files=0)}}
    assert "NO SPILL on worker w0" in job.worker_problems(phases, GiB, {"w0": 640 * MiB})[0]


def test_no_bytes_between_workers_is_no_shuffle_unless_a_worker_was_lost():
    phases = {"persisted": {"w0": view(sent=7), "w1": view(sent=7)}, "shuffled": {"w0": view(sent=7), "w1": view(sent=7)}}
    limits = {"w0": 640 * MiB, "w1": 640 * MiB}
    assert job.worker_problems(phases, 1280 * MiB, limits) == ["NO SHUFFLE: no worker sent data to another during the shuffle"]
    assert job.worker_problems(phases, 1280 * MiB, limits, lost=["w1"]) == []


def test_data_that_fits_one_worker_proves_nothing():
    assert "proves nothing" in job.worker_problems({}, 600 * MiB, {"w0": 640 * MiB})[0]


def test_the_jobs_judge_reports_a_failed_step_or_a_wrong_column():
    assert job.judge({"error": "TimeoutError: x"}) == ["the job failed: TimeoutError: x"]
    rep = {"phases": {}, "data_bytes": 2, "memory_limits": {}, "result_ok": False, "expected": 3, "got": 3,
           "wrong_columns": 1, "first_wrong": {"column": 5}}
    assert job.judge(rep) == ["WRONG RESULT: expected 3, got 3; 1 wrong column(s), first {'column': 5}"]


def test_closed_forms_match_the_array_and_catch_a_moved_row():
    n = 37
    a = np.arange(n * n, dtype="int64").reshape(n, n)
    cols, weighted = job.expected_columns(n)
    rows = np.arange(n)[:, None]
    assert a.sum(axis=0).tolist() == cols and (a * rows).sum(axis=0).tolist() == weighted
    assert job.total_sum(n) == int(a.sum())
    b = a.copy()
    b[[3, 4]] = b[[4, 3]]                       # same column sums, rows swapped: the weighted sum sees it
    assert b.sum(axis=0).tolist() == cols and (b * rows).sum(axis=0).tolist() != weighted


def test_block_and_shuffle_pieces_are_exact():
    side, step = 12, 4
    info = {None: {"array-location": [(4, 8), (0, 12)]}}
    block = job._block(side, "numpy", block_info=info)
    assert block.tolist() == np.arange(side * side).reshape(side, side)[4:8].tolist()
    pieces = job._split(block, step)
    taken = [job._take(pieces, j) for j in range(3)]
    assert all(t.base is None for t in taken) and np.concatenate(taken, axis=1).tolist() == block.tolist()
    assert job._concat([taken[0], taken[0]]).shape == (8, 4)


def test_shape_plan_and_the_int64_bound():
    side, blocks = job.plan_shape(1280 * MiB, 64 * MiB, 2)
    assert side % blocks == 0 and blocks == 20 and abs(side * side * 8 - 1280 * MiB) < 0.01 * 1280 * MiB
    assert job.plan_shape(10 * MiB, 64 * MiB, 3)[1] == 6          # at least 2 blocks per worker
    assert job.check_fits(side) is None and "too large" in job.check_fits(80_000)


def test_time_by_action_sums_the_task_stream():
    recs = [{"key": ("piece-ab12", 0, 1), "startstops": [{"action": "compute", "start": 1.0, "stop": 1.5},
                                                          {"action": "transfer", "start": 0.0, "stop": 0.25}]},
            {"key": ("piece-ab12", 1, 1), "startstops": [{"action": "disk-read", "start": 0.0, "stop": 2.0}]}]
    assert job.time_by_action(recs) == {"seconds": {"compute": 0.5, "disk-read": 2.0, "transfer": 0.25},
                                        "tasks": {"piece": 2}}


# ---- the task layer: bad flags exit 2 with one message ----

@pytest.mark.parametrize("args, message", [
    (["--cluster", "0"], "--cluster: 0 workers"),
    (["--cluster", "2", "--memory", "768m", "--memory-limit", "512m"], "--memory: 768 MiB is too small for --memory-limit"),
    (["--memory-limit", "512m"], "--memory-limit: applies to the cluster smoke only"),
    (["--cluster", "2", "--mode", "gpu", "--gpus", "all"], "--cluster: the Docker cluster smoke is CPU (TCP) only"),
    (["--cluster", "1", "--kill-worker"], "--kill-worker: with --cluster 1 no worker is left"),
])
def test_invoke_smoke_cluster_bad_flags_exit_2(args, message):
    run = subprocess.run(["invoke", "smoke", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_membership_a_lost_or_restarted_worker_fails_at_once_unless_losses_are_allowed():
    start = {"tcp://a:1": "w0", "tcp://b:1": "w1"}
    strict = job.Membership(start, allow_loss=False)
    strict.update(start)
    with pytest.raises(job.WorkerLost, match=r"worker w1 \(tcp://b:1\) left the cluster"):
        strict.update({"tcp://a:1": "w0"})
    with pytest.raises(job.WorkerLost, match="worker w0 came back at a new address tcp://a:2"):
        job.Membership(start, allow_loss=False).update({"tcp://a:2": "w0", "tcp://b:1": "w1"})
    loose = job.Membership(start, allow_loss=True)
    loose.update({"tcp://a:1": "w0"})
    loose.update({"tcp://a:1": "w0"})              # reported once, not at every poll
    assert loose.notes == ["worker w1 (tcp://b:1) left the cluster during the job"]
    assert loose.lost_names(["w0"]) == ["w1"]


def test_the_shuffle_defaults_to_what_was_measured_to_work_per_array_module():
    from rapidship.runtime.cluster import _parser, default_shuffle

    assert default_shuffle("numpy") == "split" and default_shuffle("cupy") == "tasks"
    assert _parser().parse_args(["--scheduler", "tcp://s:8786", "--workers", "2", "--data-bytes", "1GB"]).shuffle is None


# ---- --metrics: every worker's /metrics, scraped ----

EXPOSITION = """# HELP rapidship_cgroup_memory_peak_bytes the most memory the cgroup has used
# TYPE rapidship_cgroup_memory_peak_bytes gauge
rapidship_cgroup_memory_peak_bytes{worker="w0"} 5.0e+08
# HELP rapidship_cgroup_memory_events_total the cgroup's memory events (memory.events)
# TYPE rapidship_cgroup_memory_events_total counter
rapidship_cgroup_memory_events_total{event="oom_kill",worker="w0"} %d
rapidship_cgroup_memory_events_created{event="oom_kill",worker="w0"} 1.7e+09
# HELP dask_worker_spill_bytes_total Total size of spilled/unspilled data
# TYPE dask_worker_spill_bytes_total counter
dask_worker_spill_bytes_total{activity="disk-write"} 123.0
# HELP process_cpu_seconds_total Total user and system CPU time
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 7.0
"""


def test_a_scrape_keeps_the_products_and_dasks_series_by_labels_without_the_worker():
    from rapidship.smoke.scrape import OOM_KILLS, parse

    got = parse(EXPOSITION % 0)
    assert got == {"rapidship_cgroup_memory_peak_bytes": 5e8, OOM_KILLS: 0.0,
                   'dask_worker_spill_bytes_total{activity="disk-write"}': 123.0}


def test_scrapes_over_time_keep_the_highest_and_the_last_value():
    from rapidship.smoke.scrape import OOM_KILLS, Scraped, parse

    s = Scraped("10.0.0.2:8788")
    s.failed("URLError: refused")                    # before the worker listened
    s.add(parse(EXPOSITION % 0))
    s.add({**parse(EXPOSITION % 1), "rapidship_cgroup_memory_peak_bytes": 1.0})
    r = s.record()
    assert (r.scrapes, r.failures, r.last_error) == (2, 1, "URLError: refused")
    assert r.highest["rapidship_cgroup_memory_peak_bytes"] == 5e8 and r.last["rapidship_cgroup_memory_peak_bytes"] == 1
    assert r.highest[OOM_KILLS] == 1


def test_a_malformed_scrape_counts_as_failed_not_as_zeros(monkeypatch):
    from rapidship.smoke import scrape

    class Body:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def read(self):
            return b"rapidship_cgroup_memory_peak_bytes{worker= 5\n"

    monkeypatch.setattr(scrape.urllib.request, "urlopen", lambda *a, **k: Body())
    s = scrape.Scraped("10.0.0.2:8788")
    scrape.fetch(s)
    assert (s.scrapes, s.failures) == (0, 1) and s.highest == {} and s.last_error.startswith("ValueError")


def test_metrics_turns_on_each_http_server_and_the_preload(variant):
    p = plan(variant, metrics=True)
    w = container_argv(p, "worker", 0)
    assert w[-4:] == ["--dashboard-address", ":8788", "--preload", "rapids_runtime.metrics"]
    assert "--no-dashboard" not in w and "--publish" not in w and "-p" not in w
    s = container_argv(p, "scheduler")
    assert s[-2:] == ["--dashboard-address", ":8787"]
    with pytest.raises(ConfigError) as err:
        plan(variant, metrics_targets="/tmp/t.json")
    assert err.value.where == "--metrics-targets" and "--metrics" in err.value.fix


def test_a_worker_whose_metrics_never_answered_or_counted_a_kill_fails_the_run(variant):
    from rapidship.records import ScrapedMetrics
    from rapidship.smoke.scrape import OOM_KILLS

    p = plan(variant, metrics=True)
    w0, w1 = p.worker_names
    good = ScrapedMetrics(target="10.0.0.2:8788", scrapes=20, failures=1, highest={OOM_KILLS: 0})
    ok = {w0: dict(metrics=good), w1: dict(metrics=good)}
    assert judge(p, containers(p, **ok)) == []
    dead = ScrapedMetrics(target="10.0.0.3:8788", scrapes=0, failures=31, last_error="URLError: refused")
    problems = judge(p, containers(p, **{**ok, w1: dict(metrics=dead)}))
    assert problems == [f"--metrics: worker {w1}'s /metrics never answered (31 tries; last: URLError: refused)"]
    assert len(judge(p, containers(p))) == 2         # no scrape record at all: never answered, both
    killed = good.model_copy(update={"highest": {OOM_KILLS: 2}})
    problems = judge(p, containers(p, **{**ok, w0: dict(metrics=killed)}))
    assert problems == [f"OOM KILL inside worker {w0}: its /metrics counted 2 oom_kill(s) in its cgroup"]
    q = plan(variant)
    assert judge(q, containers(q)) == []             # without --metrics nothing is asked


def test_reads_by_others_since_the_end_values_are_the_workers_count_less_the_smokes_own():
    from rapidship.smoke.scrape import SERVED, Scraped

    s = Scraped("10.0.0.2:8788")
    s.add({SERVED: 5})
    assert s.others_since_end() is None               # not asked before the end
    s.mark_end()
    s.add({SERVED: 6})                                # only the smoke's own scrape since
    assert s.others_since_end() == 0
    s.add({SERVED: 9})                                # two by a Prometheus between the smoke's two
    assert s.others_since_end() == 2 and s.record().others_since_end == 2
    s.add({SERVED: 1})                                # the process restarted: its own count starts over
    assert s.others_since_end() == 0
    s.add({SERVED: 3})
    assert s.others_since_end() == 1
    old = Scraped("10.0.0.3:8788")                    # an image whose /metrics counts no scrapes
    old.add({})
    old.mark_end()
    old.add({})
    assert old.others_since_end() is None


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _lingering(monkeypatch, variant, answers, **kw):
    """final_scrapes over scripted answers, [[worker i's SERVED count per fetch]] (None: the fetch
    fails); past the script each worker answers only the smoke (its count one up per fetch)."""
    from rapidship.smoke import cluster, scrape

    p = plan(variant, metrics=True, **kw)
    monkeypatch.setattr(cluster.ENGINE, "container_state", lambda n: {"Running": n in p.worker_names})
    queue = {n: list(answers[i]) if answers else [] for i, n in enumerate(p.worker_names)}

    def fetch(s):
        value = queue[s.target].pop(0) if queue[s.target] else s.last.get(scrape.SERVED, 0) + 1
        if value is None:
            s.failed("URLError: refused")
        else:
            s.add({scrape.SERVED: value})

    monkeypatch.setattr(scrape, "fetch", fetch)
    scraped = {n: scrape.Scraped(n) for n in p.worker_names}
    clock = _Clock()
    notes = cluster.final_scrapes(p, scraped, clock, clock.sleep)
    return [scraped[n] for n in p.worker_names], notes, clock.now


def test_the_cluster_stays_up_until_the_prometheus_told_of_it_has_read_every_workers_end_values(monkeypatch, variant):
    # worker 0 answers at once and is read by Prometheus after 3 s; worker 1 comes back from an OOM
    # kill after 2 s and is read before the next interval: the cluster waits for both, not a second more
    answers = [[10, 11, 13], [None, None, 1, 3]]
    (w0, w1), notes, waited = _lingering(monkeypatch, variant, answers, metrics_targets="/srv/t.json")
    assert notes == [] and waited == 4.0 and w0.others_since_end() == 1 and w1.others_since_end() == 1
    # nobody scrapes: held for --metrics-linger, then a note naming the worker, the file and the flag
    (w0, w1), notes, waited = _lingering(monkeypatch, variant, [], metrics_targets="/srv/t.json", metrics_linger=5)
    assert waited == 5.0 and len(notes) == 2 and w0.others_since_end() == 0
    assert notes[0].startswith(f"{w0.target}: nothing but the smoke read its /metrics in the 5 s after the job")
    assert "/srv/t.json" in notes[0] and "--metrics-linger" in notes[0]
    # without a targets file nobody else was told: no waiting past the end values
    (w0, w1), notes, waited = _lingering(monkeypatch, variant, answers)
    assert notes == [] and waited == 2.0 and w0.others_since_end() is None


def test_metrics_linger_needs_a_targets_file_and_a_sane_number(variant):
    for kw, what in ((dict(metrics=True, metrics_linger=30), "--metrics-targets"),
                     (dict(metrics=True, metrics_targets="/srv/t.json", metrics_linger=-1), "3600")):
        with pytest.raises(ConfigError) as err:
            plan(variant, **kw)
        assert err.value.where == "--metrics-linger" and what in str(err.value), err.value
    assert plan(variant, metrics=True, metrics_targets="/srv/t.json", metrics_linger=0).metrics_linger_s == 0


def test_the_targets_file_is_prometheus_file_sd(tmp_path):
    from rapidship.smoke.scrape import targets_file

    path = tmp_path / "sd" / "targets.json"
    targets_file(path, "c1", {"c1-worker-0": ("worker", "10.0.0.3:8788"), "c1-scheduler": ("scheduler", "10.0.0.2:8787")})
    groups = __import__("json").loads(path.read_text())
    # each in its job of the shipped prometheus.yml: the liveness rules count worker targets only
    assert groups == [{"targets": ["10.0.0.2:8787"], "labels": {"cluster": "c1", "role": "scheduler",
                                                               "container": "c1-scheduler", "job": "dask-scheduler"}},
                      {"targets": ["10.0.0.3:8788"], "labels": {"cluster": "c1", "role": "worker",
                                                               "container": "c1-worker-0", "job": "dask-workers"}}]
    assert list(path.parent.iterdir()) == [path]      # written whole: no temp file left
    targets_file(path, "c1", {})                      # the cluster gone: no target left to page about
    assert __import__("json").loads(path.read_text()) == []
