"""The Compose stack of a DeployPlan (pure): a scheduler, N capped workers each with its own spill
volume, on one internal network; a `check` profile adds the cluster job that must spill on every
worker and shuffle between them (what `invoke smoke --cluster` runs)."""

from __future__ import annotations

from rapidship.deploy.plan import SPILL, DeployPlan

TMPFS = "/tmp:rw,nosuid,nodev,size=64m,mode=1777"
NETWORK = "cluster"


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
                                  "environment": {"DASK_TEMPORARY_DIRECTORY": "/tmp"}, "hostname": scheduler}}
    volumes = {}
    for i in range(plan.workers):
        name = worker_name(plan, i)
        worker = {**_hardened(plan, plan.memory_bytes), "command": plan.worker_command, "hostname": name,
                  "shm_size": plan.shm_bytes, "volumes": [f"{name}-spill:{SPILL}"], "depends_on": [scheduler]}
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
    return {"services": services, "volumes": volumes,
            # internal: no gateway, nothing published; the workers reach only each other
            "networks": {NETWORK: {"internal": True, "labels": {"io.rapidship.deploy": plan.name}}}}
