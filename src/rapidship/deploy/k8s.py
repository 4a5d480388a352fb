"""Kubernetes manifests of a DeployPlan (pure): a DaskCluster for the Dask Kubernetes operator, or
plain Deployments and a Service. Pods run as the image's uid in group 0 (any uid works: the home
and spill dir are group-writable), read-only, no capabilities, RuntimeDefault seccomp; the dask
command is `args`, so the image's entrypoint (the preflight) still runs."""

from __future__ import annotations

from rapidship.deploy.plan import SCHEDULER_HTTP, SCHEDULER_PORT, SPILL, WORKER_HTTP, DeployPlan

KUBERNETES_VERSION = "1.33.0"   # what the manifests are validated against (kubernetes-validate --strict)
OPERATOR_API = "kubernetes.dask.org/v1"


def _pod(plan: DeployPlan, role: str, pull_secret: str | None) -> dict:
    worker = role == "worker"
    cap = plan.memory_bytes if worker else plan.scheduler_memory_bytes
    limits: dict = {"memory": str(cap)}
    if worker and plan.gpu:
        limits["nvidia.com/gpu"] = str(plan.gpus_per_worker)   # quantities are strings (the CRD says so)
    mounts = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict] = [{"name": "tmp", "emptyDir": {"sizeLimit": str(64 * 2**20)}}]
    if worker:
        mounts += [{"name": "spill", "mountPath": SPILL}, {"name": "dshm", "mountPath": "/dev/shm"}]
        spill = ({"ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": plan.spill_storage_class,
            "resources": {"requests": {"storage": str(plan.spill_bytes)}}}}}} if plan.spill_storage_class
            else {"emptyDir": {"sizeLimit": str(plan.spill_bytes)}})
        volumes += [{"name": "spill", **spill},
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": str(plan.shm_bytes)}}]
    ports = ([{"name": "http-dashboard", "containerPort": WORKER_HTTP}] if worker else
             [{"name": "tcp-comm", "containerPort": SCHEDULER_PORT},
              {"name": "http-dashboard", "containerPort": SCHEDULER_HTTP}])
    container = {
        "name": role, "image": plan.image, "imagePullPolicy": "IfNotPresent",
        "args": plan.worker_command if worker else plan.scheduler_command,
        "env": [{"name": "DASK_TEMPORARY_DIRECTORY", "value": SPILL if worker else "/tmp"}],
        "ports": ports, "resources": {"limits": limits, "requests": dict(limits)}, "volumeMounts": mounts,
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}}
    pod: dict = {"containers": [container], "volumes": volumes,
                 "nodeSelector": {"kubernetes.io/arch": plan.arch},
                 "securityContext": {"runAsNonRoot": True, "runAsUser": plan.uid, "runAsGroup": 0, "fsGroup": 0,
                                     "seccompProfile": {"type": "RuntimeDefault"}}}
    if pull_secret:
        pod["imagePullSecrets"] = [{"name": pull_secret}]   # named, never embedded
    return pod


def _scheduler_service_spec(plan: DeployPlan, selector: dict) -> dict:
    return {"type": "ClusterIP", "selector": selector,
            "ports": [{"name": "tcp-comm", "protocol": "TCP", "port": SCHEDULER_PORT, "targetPort": "tcp-comm"},
                      {"name": "http-dashboard", "protocol": "TCP", "port": SCHEDULER_HTTP,
                       "targetPort": "http-dashboard"}]}


def dask_cluster(plan: DeployPlan, pull_secret: str | None = None) -> list[dict]:
    """One DaskCluster: the operator makes the scheduler pod, its Service `<name>-scheduler`, the workers."""
    selector = {"dask.org/cluster-name": plan.name, "dask.org/component": "scheduler"}
    return [{"apiVersion": OPERATOR_API, "kind": "DaskCluster",
             "metadata": {"name": plan.name, "labels": {"app.kubernetes.io/part-of": "rapidship"}},
             "spec": {"worker": {"replicas": plan.workers, "spec": _pod(plan, "worker", pull_secret)},
                      "scheduler": {"spec": _pod(plan, "scheduler", pull_secret),
                                    "service": _scheduler_service_spec(plan, selector)}}}]


def plain(plan: DeployPlan, pull_secret: str | None = None) -> list[dict]:
    """Without the operator: a scheduler Deployment and its Service, a worker Deployment."""
    out = []
    for role, replicas in (("scheduler", 1), ("worker", plan.workers)):
        labels = {"app.kubernetes.io/name": plan.name, "app.kubernetes.io/component": role}
        out.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"{plan.name}-{role}",
                                                                             "labels": labels},
                    "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                             "template": {"metadata": {"labels": labels}, "spec": _pod(plan, role, pull_secret)}}})
    selector = {"app.kubernetes.io/name": plan.name, "app.kubernetes.io/component": "scheduler"}
    out.insert(1, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"{plan.name}-scheduler"},
                   "spec": _scheduler_service_spec(plan, selector)})
    return out


def pod_specs(doc: dict) -> list[tuple[str, dict]]:
    """(where, PodSpec) of every pod a manifest describes (DaskCluster, Deployment, Pod)."""
    kind, name = doc.get("kind"), (doc.get("metadata") or {}).get("name", "?")
    spec = doc.get("spec") or {}
    if kind == "DaskCluster":
        return [(f"DaskCluster {name} {role}", (spec.get(role) or {}).get("spec") or {})
                for role in ("scheduler", "worker")]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return [(f"{kind} {name}", ((spec.get("template") or {}).get("spec")) or {})]
    if kind == "Pod":
        return [(f"Pod {name}", spec)]
    return []
