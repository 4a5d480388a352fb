"""The Compose stack `invoke deploy --target compose` writes, run for real with Debian's
docker-compose 1.29 on the real cpu-debian12 image: two workers under 1 GiB caps (dask
--memory-limit 640 MiB, the doctor's), each with its own spill volume, on an internal network; the
`check` profile's job spills on every worker and shuffles between them with an exact result; the
containers run the hardened profile; `down -v` leaves nothing. (Here the image is the local build
by id, `--image sha256:...`: no registry in this test; without --image the push record's digest
is used, tests/unit/deploy.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest
import yaml

from rapidship.engine import ENGINE
from support.commands import CPU_VARIANT, invoke
from support.prometheus import serve_prometheus

pytestmark = pytest.mark.docker
GiB = 2**30


def compose(project: str, path, *args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(["docker-compose", "-p", project, "-f", str(path), *args], capture_output=True, text=True,
                          timeout=timeout)


def left(project: str) -> list[str]:
    out = []
    for kind in ("ps -a", "volume ls", "network ls"):
        proc = subprocess.run(["docker", *kind.split(), "-q", "--filter", f"label=com.docker.compose.project={project}"],
                              capture_output=True, text=True)
        out += proc.stdout.split()
    return out


def test_the_stack_spills_on_every_worker_and_down_leaves_nothing(cpu_image, tmp_path, unique_name):
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed: scripts/setup installs Debian's docker-compose")
    project = unique_name.replace("-", "")[:20]
    invoke("deploy", "--variant", CPU_VARIANT, "--image", cpu_image.image_id, "--memory", "1g", "--name", project,
           "--out", str(tmp_path))
    path = tmp_path / "compose.yaml"
    assert compose(project, path, "config", "-q").returncode == 0
    assert invoke("deploy-check", "--file", str(path), check=False).returncode == 0
    try:
        up = compose(project, path, "up", "-d")
        assert up.returncode == 0, up.stderr
        job = compose(project, path, "--profile", "check", "run", "--rm", f"{project}-job")
        assert job.returncode == 0, job.stderr[-3000:]
        report = json.loads(job.stdout)
        assert report["verdict"] == "PASS" and report["result_ok"], report.get("problems")
        shuffled = report["phases"]["shuffled"]
        assert len(shuffled) == 2
        for view in shuffled.values():   # every worker spilled to its own volume and sent data to the other
            assert view["disk"][1] > 0 and view["spill_files"] > 0 and view["sent_bytes"] > 0
            assert view["oom_kills"] == 0
        for i in range(2):
            ids = compose(project, path, "ps", "-q", f"{project}-worker-{i}").stdout.split()
            info = ENGINE.inspect_container(ids[0])
            host = info["HostConfig"]
            assert host["Memory"] == host["MemorySwap"] == GiB and host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
            assert "no-new-privileges:true" in host["SecurityOpt"] and info["Config"]["User"] == "1001:0"
            assert info["Config"]["Entrypoint"] == ["/usr/local/bin/rapids-entrypoint"]   # the preflight ran
            assert not (info["NetworkSettings"].get("Ports") or {}) or all(
                not v for v in info["NetworkSettings"]["Ports"].values())                  # nothing published
    finally:
        down = compose(project, path, "--profile", "check", "down", "-v", "--remove-orphans")
    assert down.returncode == 0, down.stderr
    assert left(project) == []


def test_deploy_check_refuses_an_edit_that_skips_the_preflight(cpu_image, tmp_path):
    invoke("deploy", "--variant", CPU_VARIANT, "--image", cpu_image.image_id, "--memory", "1g", "--out", str(tmp_path))
    doc = yaml.safe_load((tmp_path / "compose.yaml").read_text())
    doc["services"]["rapidship-worker-0"]["entrypoint"] = ["dask"]
    doc["services"]["rapidship-worker-1"]["mem_limit"] = "700m"
    (tmp_path / "edited.yaml").write_text(yaml.safe_dump(doc))
    proc = invoke("deploy-check", "--file", str(tmp_path / "edited.yaml"), check=False)
    assert proc.returncode == 1
    text = " ".join(proc.stderr.split())
    assert "service rapidship-worker-0: entrypoint:" in text and "service rapidship-worker-1: memory:" in text


def test_the_stack_with_its_prometheus_is_a_valid_compose_file(tmp_path):
    """docker-compose reads it whole (the Prometheus image cannot be pulled here, so it is not started)."""
    prom = "registry.example/prom/prometheus@sha256:" + "c" * 64
    invoke("deploy", "--variant", CPU_VARIANT, "--image", "sha256:" + "d" * 64, "--memory", "1g",
           "--prometheus-image", prom, "--out", str(tmp_path))
    proc = compose("rsprom", tmp_path / "compose.yaml", "--profile", "monitoring", "config")
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(proc.stdout)
    assert doc["services"]["rapidship-prometheus"]["ports"] == ["127.0.0.1:9090:9090/tcp"]   # loopback only
    refused = invoke("deploy", "--variant", CPU_VARIANT, "--image", "sha256:" + "d" * 64, "--target", "k8s",
                     "--prometheus-image", prom, "--out", str(tmp_path / "k"), check=False)
    assert refused.returncode == 2 and "--prometheus-image: applies to --target compose only" in refused.stderr


def scrape_targets(prom, project: str, path) -> None:
    """The stack's containers as file_sd targets of a real Prometheus, at their current addresses."""
    from rapidship.smoke.scrape import targets_file

    targets = {}
    for service, role, port in ((f"{project}-scheduler", "scheduler", 8787), (f"{project}-worker-0", "worker", 8788),
                                (f"{project}-worker-1", "worker", 8788)):
        cid = compose(project, path, "ps", "-q", service).stdout.split()[0]
        info = ENGINE.inspect_container(cid)
        (net,) = info["NetworkSettings"]["Networks"].values()
        targets[info["Name"].lstrip("/")] = (role, f"{net['IPAddress']}:{port}")
    targets_file(prom.targets, project, targets)


def test_a_worker_killed_mid_job_restarts_and_the_job_ends_with_one_clear_verdict(cpu_image, tmp_path, unique_name):
    """The kernel's OOM kill of a worker container's main process, as SIGKILL to its pid from the
    host (a `docker kill` would be a stop the restart policy honours): the job either finishes with
    the exact result or fails saying why, never a wrong answer; the worker comes back under its name
    (`restart: unless-stopped`), the scheduler has both workers again, and a real Prometheus with the
    shipped rules, scraping the stack, fires WorkerRestarted for that worker."""
    project = unique_name.replace("-", "")[:20]
    invoke("deploy", "--variant", CPU_VARIANT, "--image", cpu_image.image_id, "--memory", "1g", "--name", project,
           "--out", str(tmp_path))
    path = tmp_path / "compose.yaml"
    (tmp_path / "prometheus").mkdir()
    with serve_prometheus(tmp_path / "prometheus") as prom:
        try:
            _killed_mid_job(project, path, prom)
        finally:
            compose(project, path, "--profile", "check", "down", "-v", "--remove-orphans")
    assert left(project) == []


def _killed_mid_job(project: str, path, prom) -> None:
    assert compose(project, path, "up", "-d").returncode == 0
    scrape_targets(prom, project, path)
    job = subprocess.Popen(["docker-compose", "-p", project, "-f", str(path), "--profile", "check", "run", "--rm",
                            f"{project}-job"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(12)  # the job is spilling and shuffling by now
    victim = compose(project, path, "ps", "-q", f"{project}-worker-0").stdout.split()[0]
    os.kill(ENGINE.inspect_container(victim)["State"]["Pid"], signal.SIGKILL)
    out, err = job.communicate(timeout=600)
    if job.returncode == 0:
        report = json.loads(out)
        assert report["verdict"] == "PASS" and report["result_ok"], report
    else:  # failed: said in the report or on one line, and not as a result that passed unchecked
        said = out.strip() or err.strip().splitlines()[-1]
        assert said and "Traceback" not in err, err[-3000:]
        if out.strip().startswith("{"):
            report = json.loads(out)
            assert report["verdict"] != "PASS" and report["problems"], report
    for _ in range(120):
        state = ENGINE.inspect_container(victim)
        if state["State"]["Running"] and state["RestartCount"] >= 1:
            break
        time.sleep(0.5)
    assert state["RestartCount"] >= 1 and state["State"]["Running"], state["State"]
    names = wait_for_workers(project, path, 60)
    assert f"{project}-worker-0" in names and f"{project}-worker-1" in names, names  # back, under its name
    scrape_targets(prom, project, path)   # its address may have changed with the restart
    name = ENGINE.inspect_container(victim)["Name"].lstrip("/")
    for _ in range(60):
        fired = [a for a in prom.firing("WorkerRestarted") if a.get("container") == name]
        if fired:
            break
        time.sleep(1)
    assert fired, prom.query("process_start_time_seconds")
    others = [a for a in prom.firing("WorkerRestarted") if a.get("container") != name]
    assert others == [], others   # the worker that was not killed did not restart


# run inside the scheduler's container (the stack's network is internal): each worker's dask name and
# a sum computed on that worker alone
_ON_EACH_WORKER = """
import json, sys
from distributed import Client
c = Client('tcp://127.0.0.1:8786', timeout=20)
if sys.argv[1] == 'names':
    print(json.dumps(sorted(w['name'] for w in c.scheduler_info()['workers'].values())))
else:
    print(json.dumps({w['name']: c.submit(sum, range(10**6), workers=[a], pure=False).result(timeout=120)
                      for a, w in c.scheduler_info()['workers'].items()}))
"""


def on_each_worker(project: str, path, what: str) -> subprocess.CompletedProcess:
    scheduler = compose(project, path, "ps", "-q", f"{project}-scheduler").stdout.split()[0]
    return subprocess.run(["docker", "exec", scheduler, "python", "-c", _ON_EACH_WORKER, what], capture_output=True,
                          text=True, timeout=180)


def wait_for_workers(project: str, path, seconds: int, count: int = 2) -> list[str]:
    """The workers' names the scheduler has, once it has `count` (or what it has after `seconds`)."""
    names: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        proc = on_each_worker(project, path, "names")
        names = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else []
        if len(names) >= count:
            break
        time.sleep(2)
    return names


def test_a_scheduler_crash_brings_the_workers_back_and_they_compute(cpu_image, tmp_path, unique_name):
    """The scheduler's main process SIGKILLed (a crash, an OOM kill): the scheduler comes back, and so
    do both workers, which dask ends with exit 0 once their scheduler is gone (a restart policy that
    looks at the exit code leaves them down); each then computes an exact sum."""
    project = unique_name.replace("-", "")[:20]
    invoke("deploy", "--variant", CPU_VARIANT, "--image", cpu_image.image_id, "--memory", "1g", "--name", project,
           "--out", str(tmp_path))
    path = tmp_path / "compose.yaml"
    try:
        started = time.monotonic()
        assert compose(project, path, "up", "-d").returncode == 0
        expected = [f"{project}-worker-0", f"{project}-worker-1"]
        assert wait_for_workers(project, path, 180) == expected
        joined = time.monotonic() - started
        scheduler = compose(project, path, "ps", "-q", f"{project}-scheduler").stdout.split()[0]
        killed = time.monotonic()
        os.kill(ENGINE.inspect_container(scheduler)["State"]["Pid"], signal.SIGKILL)
        for _ in range(120):
            state = ENGINE.inspect_container(scheduler)
            if state["State"]["Running"] and state["RestartCount"] >= 1:
                break
            time.sleep(0.5)
        assert state["RestartCount"] >= 1 and state["State"]["Running"], state["State"]
        names = wait_for_workers(project, path, 180)
        back = time.monotonic() - killed
        workers = {n: ENGINE.inspect_container(compose(project, path, "ps", "-q", n).stdout.split()[0]) for n in expected}
        assert names == expected, {n: (w["State"]["Status"], w["State"]["ExitCode"], w["RestartCount"],
                                       w["HostConfig"]["RestartPolicy"]) for n, w in workers.items()}
        assert all(w["RestartCount"] >= 1 for w in workers.values())   # the same containers, restarted
        computed = on_each_worker(project, path, "compute")
        assert computed.returncode == 0, computed.stderr[-3000:]
        assert json.loads(computed.stdout) == {n: 499999500000 for n in expected}
        print(f"workers joined {joined:.1f} s after up; back and joined {back:.1f} s after the scheduler's kill")
        _probes_answer(project, path, tmp_path / "k8s")
    finally:
        down = compose(project, path, "--profile", "check", "down", "-v", "--remove-orphans")
    assert down.returncode == 0, down.stderr
    assert left(project) == []


_GET = """
import sys, urllib.request
for url in sys.argv[1:]:
    with urllib.request.urlopen(url, timeout=5) as r:
        print(url, r.status, r.read().decode()[:40])
"""


def _probes_answer(project: str, path, out) -> None:
    """The Kubernetes manifests' probes (as `invoke deploy --target k8s` writes them) asked of the
    stack's scheduler and a worker, which run the same dask commands: each probe's port, by the
    container's port name, answers its path with 200."""
    invoke("deploy", "--variant", CPU_VARIANT, "--target", "k8s", "--image",
           "registry.example/rapidship/dask@sha256:" + "0" * 64, "--memory", "1g", "--name", project, "--out", str(out))
    urls = []
    for doc in yaml.safe_load_all((out / "plain.yaml").read_text()):
        if doc["kind"] != "Deployment":
            continue
        (c,) = doc["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        host = f"{project}-worker-0" if c["name"] == "worker" else "127.0.0.1"
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            get = c[kind]["httpGet"]
            urls.append(f"http://{host}:{ports[get['port']]}{get['path']}")
    scheduler = compose(project, path, "ps", "-q", f"{project}-scheduler").stdout.split()[0]
    proc = subprocess.run(["docker", "exec", scheduler, "python", "-c", _GET, *sorted(set(urls))], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    answered = proc.stdout.splitlines()
    assert len(answered) == 2 and all(" 200 ok" in line for line in answered), answered   # scheduler and worker
