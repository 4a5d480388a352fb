"""The Compose stack of a DeployPlan (pure): a scheduler, N capped workers each with its own spill
volume, on one internal network; a `check` profile adds the cluster job that must spill on every
worker and shuffle between them (what `invoke smoke --cluster` runs)."""

from __future__ import annotations

from rapidship.deploy.plan import SPILL, DeployPlan

TMPFS = "/tmp:rw,nosuid,nodev,size=64m,mode=1777"
NETWORK = "cluster"
MONITORING = "monitoring"
GIB = 2**30
# A worker's exit code does not say whether it should come back: dask ends a worker whose scheduler
# went away with exit 0 (it never reconnects), which `on-failure` leaves down for good. The stack
# has a fixed set of workers, so each comes back after any exit (a kill, an OOM kill, a lost
# scheduler), under the same name, until an operator stops it (`stop`, `down`, `docker stop`);
# unlike `always`, a stopped one stays stopped when dockerd restarts.
RESTART = "unless-stopped"


def _hardened(plan: DeployPlan, cap: int) -> dict:
    """The run profile of every container (the cluster smoke's, in Compose's words)."""
    return {"image": plan.image, "user": f"{plan.uid}:0", "read_only": True, "tmpfs": [TMPFS],
            "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"],
            "mem_limit": cap, "memswap_limit": cap, "networks": [NETWORK]}


def worker_name(plan: DeployPlan, i: int) -> str:
    return f"{plan.name}-worker-{i}"


def stack(plan: DeployPlan, job_data_bytes: int | None = None) -> dict:
    scheduler = f"{plan.name}-scheduler"
    services: dict = {scheduler: {**_hardened(plan, plan.scheduler_memory_bytes), "command": plan.scheduler_command,
                                  "environment": {"DASK_TEMPORARY_DIRECTORY": "/tmp"}, "hostname": scheduler,
                                  "restart": RESTART}}
    volumes = {}
    for i in range(plan.workers):
        name = worker_name(plan, i)
        worker = {**_hardened(plan, plan.memory_bytes), "command": plan.worker_command(name), "hostname": name,
                  "shm_size": plan.shm_bytes, "volumes": [f"{name}-spill:{SPILL}"], "depends_on": [scheduler],
                  "restart": RESTART}
        if plan.gpu:   # UCX pins its buffers: unlimited memlock (a CPU worker needs none, and hosts may refuse it)
            worker["ulimits"] = {"memlock": {"soft": -1, "hard": -1}}
            worker["deploy"] = {"resources": {"reservations": {"devices": [
                {"driver": "nvidia", "device_ids": [str(i)], "capabilities": ["gpu"]}]}}}
        services[name] = worker
        volumes[f"{name}-spill"] = {"labels": {"io.rapidship.deploy": plan.name}}
    data = job_data_bytes or plan.workers * plan.memory_limit
    services[f"{plan.name}-job"] = {
        **_hardened(plan, plan.scheduler_memory_bytes), "profiles": ["check"],
        "environment": {"DASK_TEMPORARY_DIRECTORY": "/tmp", "PYTHONPATH": "/opt/rapidship"},
        "command": ["python", "-m", "rapids_runtime.cluster", "--scheduler", f"tcp://{scheduler}:8786",
                    "--workers", str(plan.workers), "--data-bytes", str(data),
                    *(["--xp", "cupy"] if plan.gpu else [])],
        "depends_on": [scheduler]}
    networks = {NETWORK: {"internal": True, "labels": {"io.rapidship.deploy": plan.name}}}
    if plan.prometheus_image:   # the only container with a second network: its UI on this host's loopback
        services[f"{plan.name}-prometheus"] = {
            "image": plan.prometheus_image, "profiles": ["monitoring"], "user": "65534:65534", "read_only": True,
            "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"], "mem_limit": GIB, "memswap_limit": GIB,
            "command": ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus",
                        "--web.listen-address=:9090"],
            "volumes": ["./prometheus.yml:/etc/prometheus/prometheus.yml:ro",
                        "./alerts.yml:/etc/prometheus/alerts.yml:ro", f"{plan.name}-prometheus-data:/prometheus"],
            "networks": [NETWORK, MONITORING], "ports": ["127.0.0.1:9090:9090"]}
        volumes[f"{plan.name}-prometheus-data"] = {"labels": {"io.rapidship.deploy": plan.name}}
        networks[MONITORING] = {"labels": {"io.rapidship.deploy": plan.name}}
    # internal: no gateway, nothing published; the workers reach only each other (and Prometheus them)
    return {"services": services, "volumes": volumes, "networks": networks}


def prometheus_config(plan: DeployPlan) -> dict:
    """The Prometheus of the stack: the scheduler and every worker by service name, the shipped rules.
    Both jobs' targets carry `cluster` (the stack's name): the rules match scheduler and workers on it."""
    from rapidship.deploy.plan import SCHEDULER_HTTP, WORKER_HTTP

    cluster = {"cluster": plan.name}
    return {"global": {"scrape_interval": "15s", "evaluation_interval": "15s"}, "rule_files": ["alerts.yml"],
            "scrape_configs": [
                {"job_name": "dask-scheduler", "static_configs": [
                    {"targets": [f"{plan.name}-scheduler:{SCHEDULER_HTTP}"], "labels": cluster}]},
                {"job_name": "dask-workers", "static_configs": [
                    {"targets": [f"{worker_name(plan, i)}:{WORKER_HTTP}" for i in range(plan.workers)],
                     "labels": cluster}]}]}
