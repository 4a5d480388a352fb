"""The Dask operator's scale-down against a real scheduler: its own code, not a model of it.

A DaskCluster's worker group scales down in the operator's `retire_workers` (dask-kubernetes
2026.3.0, run from its own package in the venv scripts/setup makes): it POSTs the scheduler's
`/api/v1/retire_workers` (falling back to the RPC), then deletes the Deployments named as the
retired workers. Here the scheduler and two workers are the cpu-debian12 image's, started with the
arguments and environment of the DaskCluster `invoke deploy` writes, the workers' Deployment names
given as the operator gives them (`DASK_WORKER_NAME`, which kubelet substitutes into `$(...)`);
only the Kubernetes service lookup is answered with the containers' published ports. The retired
names must be Deployment names, so the operator deletes the Deployment whose worker it retired; the
manifests before this round (no `--name`, no API route) retire a worker the operator finds no
Deployment for.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest

from rapidship.config.matrix import load_matrix
from rapidship.deploy import k8s
from rapidship.deploy.plan import plan_deploy
from support.commands import ROOT
from support.pods import docker, env_flags, substituted

pytestmark = pytest.mark.docker
VENV = ROOT / ".venv-operator" / "bin" / "python"
OPERATOR = """
import asyncio, json, logging, sys
from dask_kubernetes.operator.controller import controller as c

dashboard, comm = sys.argv[1], sys.argv[2]

async def address(service_name, namespace, port_name="tcp-comm", **_):   # the Service lookup, answered
    return dashboard if port_name == "http-dashboard" else comm

c.get_scheduler_address = address
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
print(json.dumps(asyncio.run(c.retire_workers(1, "svc", "default", "site", logging.getLogger("operator")))))
"""


@pytest.fixture
def cluster(cpu_image, tmp_path):
    """Start scheduler + 2 workers from the manifests; (start, names, containers to remove)."""
    made: list[str] = []
    network = f"rapidship-test-{uuid.uuid4().hex[:8]}"
    docker("network", "create", network)

    def start(edit=lambda pod, role: None):
        name = f"rs{uuid.uuid4().hex[:6]}"
        plan = plan_deploy(load_matrix(ROOT / "variants.yaml").get("cpu-debian12"),
                           "registry.example/rapidship/dask@sha256:" + "0" * 64, "amd64", 2, "1g", None, None, None, 1001,
                           name=name)
        manifest, *_ = k8s.dask_cluster(plan)
        pods = {role: manifest["spec"][role]["spec"] for role in ("scheduler", "worker")}
        for role, pod in pods.items():
            edit(pod, role)
        sched = pods["scheduler"]["containers"][0]
        scheduler = docker("run", "-d", "--network", network, "--network-alias", f"{name}-scheduler",
                           "-p", "127.0.0.1::8786", "-p", "127.0.0.1::8787", "--memory", "1g", *env_flags(sched),
                           cpu_image.ref, *sched["args"])
        made.append(scheduler)
        ports = {p: docker("port", scheduler, p).splitlines()[0] for p in ("8786", "8787")}
        workers = []
        for _ in range(2):
            deployment = f"{name}-default-worker-{uuid.uuid4().hex[:10]}"  # as the operator names them
            c = pods["worker"]["containers"][0]
            env = {"DASK_WORKER_NAME": deployment}
            made.append(docker("run", "-d", "--network", network, "--memory", "1g",  # the image's own /spill
                               "-e", f"DASK_WORKER_NAME={deployment}", cpu_image.ref, *substituted(c["args"], env)))
            workers.append(deployment)
        for _ in range(120):
            if len(docker_workers(scheduler)) == 2:
                break
            time.sleep(0.5)
        return f"http://{ports['8787']}", f"tcp://{ports['8786']}", workers, scheduler

    yield start
    subprocess.run(["docker", "rm", "-f", *made], capture_output=True)
    subprocess.run(["docker", "network", "rm", network], capture_output=True)


def docker_workers(scheduler: str) -> list[str]:
    """The names the scheduler knows its workers by, asked through its own client."""
    code = ("from distributed import Client; c = Client('tcp://127.0.0.1:8786', timeout=10); "
            "import json; print(json.dumps(sorted(w['name'] for w in c.scheduler_info()['workers'].values())))")
    out = subprocess.run(["docker", "exec", scheduler, "python", "-c", code], capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else []


def retire(dashboard: str, comm: str) -> tuple[list[str], str]:
    if not VENV.exists():
        pytest.fail("no .venv-operator: scripts/setup makes it (dask-kubernetes 2026.3.0 with its dependencies)")
    proc = subprocess.run([str(VENV), "-c", OPERATOR, dashboard, comm], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_a_scale_down_retires_a_worker_whose_deployment_the_operator_then_deletes(cluster):
    dashboard, comm, deployments, scheduler = cluster()
    assert docker_workers(scheduler) == sorted(deployments)  # each worker named as its Deployment
    retired, log = retire(dashboard, comm)
    assert "Retired workers" in log  # through the scheduler's HTTP API, not a fallback
    assert len(retired) == 1 and retired[0] in deployments
    for _ in range(60):
        if docker_workers(scheduler) == sorted(set(deployments) - set(retired)):
            break
        time.sleep(0.5)
    assert docker_workers(scheduler) == sorted(set(deployments) - set(retired))


def test_the_manifests_without_names_and_the_api_retire_a_worker_no_deployment_is_named_after(cluster):
    """The defect this round fixed, reproduced with the operator's own code: it falls back to the RPC,
    the scheduler retires a worker it knows by its address, and no Deployment has that name, so the
    operator deletes none (the pod restarts and its worker joins again)."""
    from rapidship.deploy.plan import ROUTES_ENV

    def before_this_round(pod, role):
        c = pod["containers"][0]
        if role == "worker":
            i = c["args"].index("--name")
            del c["args"][i:i + 2]
        else:
            c["env"] = [e for e in c["env"] if e["name"] != ROUTES_ENV]

    dashboard, comm, deployments, _ = cluster(before_this_round)
    retired, log = retire(dashboard, comm)
    assert "falling back to the Dask RPC" in log
    assert len(retired) == 1 and retired[0] not in deployments and retired[0].startswith("tcp://")
