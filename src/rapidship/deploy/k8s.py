"""Kubernetes manifests of a DeployPlan (pure): a DaskCluster for the Dask Kubernetes operator, or
plain Deployments and a Service, each with NetworkPolicies. Pods run as the image's uid in group 0
(any uid works: the home and spill dir are group-writable), read-only, no capabilities,
RuntimeDefault seccomp, no service-account token; the dask command is `args`, so the image's
entrypoint (the preflight) still runs. Workers are named after their Deployment (the operator's
DASK_WORKER_NAME) or pod, and the scheduler serves distributed's API, so the operator's scale-down
retires a worker and deletes the Deployment it ran in. The scheduler runs any client's code: the
NetworkPolicies admit to it only the cluster's workers, pods labelled as its clients, the site's
Prometheus and (DaskCluster) the operator, and let the pods send only to each other and to DNS;
with a TLS Secret every comm is tls:// with the site CA's certificates (the HTTP ports stay plain:
metrics and the API the operator calls). Every pod has startup, readiness and liveness probes on
distributed's /health and CPU requests; a PodDisruptionBudget lets a drain evict one worker at a
time."""

from __future__ import annotations

from rapidship.deploy.plan import (OPERATOR_NAMESPACE, ROUTES_ENV, SCHEDULER_CPU, SCHEDULER_HTTP, SCHEDULER_PORT,
                                   SCHEDULER_ROUTES, SPILL, TLS_DIR, WORKER_HTTP, DeployPlan, Peer, registry_pinned)

# the releases the manifests are validated against (kubernetes-validate --strict): what sites run
KUBERNETES_VERSIONS = tuple(f"1.{minor}.0" for minor in range(29, 36))
OPERATOR_API = "kubernetes.dask.org/v1"
VOLCANO_API = "batch.volcano.sh/v1alpha1"
VOLCANO_SCHEDULER = "volcano"
CLIENT_LABEL = "rapidship.io/dask-client"   # a pod labelled <this>: <cluster name> may use the scheduler
NAMESPACE_NAME = "kubernetes.io/metadata.name"   # set on every namespace by the API server, to its name
# Probes on distributed's /health (both roles serve it on their HTTP port, plain HTTP even with TLS).
# A cold node imports RAPIDS (and the preflight checks memory, spill, GPU) before the port opens:
# the startup probe gives it STARTUP_BUDGET_S; then a pod stops taking part after 30 s without an
# answer (readiness) and is restarted after 2 minutes (liveness: a task holding the GIL can stall
# the event loop for a while, a restart loses the worker's data)
PROBE_PERIOD_S = 10
STARTUP_BUDGET_S = 300


def _pod(plan: DeployPlan, role: str, pull_secret: str | None, worker_name: str = "$(POD_NAME)") -> dict:
    worker = role == "worker"
    cap = plan.memory_bytes if worker else plan.scheduler_memory_bytes
    requests: dict = {"cpu": plan.cpu if worker else SCHEDULER_CPU, "memory": str(cap)}
    limits: dict = {"memory": str(cap)}   # memory: requests = limits always (the kernel kills at the cap)
    if plan.guaranteed:   # QoS Guaranteed: a CPU limit too (the static CPU manager then pins whole cores)
        limits["cpu"] = requests["cpu"]
    if worker and plan.gpu:   # strings (the CRD says so)
        gpu = plan.gpu_share.resources(plan.scheduler) if plan.gpu_share else {"nvidia.com/gpu": str(plan.gpus_per_worker)}
        limits.update(gpu)
        requests.update(gpu)
    mounts = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict] = [{"name": "tmp", "emptyDir": {"sizeLimit": str(64 * 2**20)}}]
    share = plan.gpu_share if worker and plan.gpu else None
    if worker:
        mounts.append({"name": "spill", "mountPath": SPILL})
        spill = ({"ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": plan.spill_storage_class,
            "resources": {"requests": {"storage": str(plan.spill_bytes)}}}}}} if plan.spill_storage_class
            else {"emptyDir": {"sizeLimit": str(plan.spill_bytes)}})
        volumes.append({"name": "spill", **spill})
        if share is None or share.own_shm:   # under MPS the device plugin mounts the MPS daemon's /dev/shm
            mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
            volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": str(plan.shm_bytes)}})
    if plan.tls_secret:  # group 0 may read it (fsGroup 0): any uid the pod runs as, never others
        mounts.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
        volumes.append({"name": "tls", "secret": {"secretName": plan.tls_secret, "defaultMode": 0o440}})
    ports = ([{"name": "http-dashboard", "containerPort": WORKER_HTTP}] if worker else
             [{"name": "tcp-comm", "containerPort": SCHEDULER_PORT},
              {"name": "http-dashboard", "containerPort": SCHEDULER_HTTP}])
    env: list[dict] = [{"name": "DASK_TEMPORARY_DIRECTORY", "value": SPILL if worker else "/tmp"}]
    if worker and worker_name == "$(POD_NAME)":  # plain Deployments: the pod's own name
        env.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    if not worker:
        env.append({"name": ROUTES_ENV, "value": SCHEDULER_ROUTES})
    env += [{"name": k, "value": v} for k, v in {**plan.tls_env(), **(share.env() if share else {})}.items()]
    container = {
        "name": role, "image": registry_pinned(plan.image), "imagePullPolicy": "IfNotPresent",
        "args": plan.worker_command(worker_name) if worker else plan.scheduler_command,
        "env": env,
        "ports": ports, "resources": {"limits": limits, "requests": requests}, "volumeMounts": mounts, **_probes(),
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}}
    pod: dict = {"containers": [container], "volumes": volumes, "automountServiceAccountToken": False,
                 "nodeSelector": {"kubernetes.io/arch": plan.arch, **(share.node_labels() if share else {})},
                 "securityContext": {"runAsNonRoot": True, "runAsUser": plan.uid, "runAsGroup": 0, "fsGroup": 0,
                                     "seccompProfile": {"type": "RuntimeDefault"}}}
    if pull_secret:
        pod["imagePullSecrets"] = [{"name": pull_secret}]   # named, never embedded
    if plan.scheduler == "volcano":   # its device plugin's resources mean nothing to the default scheduler
        pod["schedulerName"] = VOLCANO_SCHEDULER
    return pod


def _probes() -> dict:
    health = {"httpGet": {"path": "/health", "port": "http-dashboard"}, "periodSeconds": PROBE_PERIOD_S,
              "timeoutSeconds": 5}
    return {"startupProbe": {**health, "failureThreshold": STARTUP_BUDGET_S // PROBE_PERIOD_S},
            "readinessProbe": {**health, "failureThreshold": 3},
            "livenessProbe": {**health, "periodSeconds": 20, "timeoutSeconds": 10, "failureThreshold": 6}}


def disruption_budget(plan: DeployPlan, workers: dict) -> dict:
    """A drain evicts one worker at a time, each next one once the last is replaced and Ready; a
    worker that is not Ready (crash-looping) never holds a drain up."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": f"{plan.name}-worker", "labels": {"app.kubernetes.io/part-of": "rapidship"}},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(workers)},
                     "unhealthyPodEvictionPolicy": "AlwaysAllow"}}


def _scheduler_service_spec(plan: DeployPlan, selector: dict) -> dict:
    return {"type": "ClusterIP", "selector": selector,
            "ports": [{"name": "tcp-comm", "protocol": "TCP", "port": SCHEDULER_PORT, "targetPort": "tcp-comm"},
                      {"name": "http-dashboard", "protocol": "TCP", "port": SCHEDULER_HTTP,
                       "targetPort": "http-dashboard"}]}


def dask_cluster(plan: DeployPlan, pull_secret: str | None = None) -> list[dict]:
    """One DaskCluster: the operator makes the scheduler pod, its Service `<name>-scheduler`, the
    workers (each in a Deployment whose name it hands the pod as DASK_WORKER_NAME); and the policies."""
    selector = {"dask.org/cluster-name": plan.name, "dask.org/component": "scheduler"}
    workers = {"dask.org/cluster-name": plan.name, "dask.org/component": "worker"}
    cluster = {"apiVersion": OPERATOR_API, "kind": "DaskCluster",
               "metadata": {"name": plan.name, "labels": {"app.kubernetes.io/part-of": "rapidship"}},
               "spec": {"worker": {"replicas": plan.workers,
                                   "spec": _pod(plan, "worker", pull_secret, "$(DASK_WORKER_NAME)")},
                        "scheduler": {"spec": _pod(plan, "scheduler", pull_secret),
                                      "service": _scheduler_service_spec(plan, selector)}}}
    return [cluster, *network_policies(plan, selector, workers, operator=True), disruption_budget(plan, workers)]


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
    workers = {"app.kubernetes.io/name": plan.name, "app.kubernetes.io/component": "worker"}
    return out + network_policies(plan, selector, workers, operator=False) + [disruption_budget(plan, workers)]


def volcano_job(plan: DeployPlan, pull_secret: str | None = None) -> list[dict]:
    """A Volcano Job (batch.volcano.sh/v1alpha1): the scheduler and the workers as two tasks, placed
    together or not at all (minAvailable: all of them, so no worker waits on a card while the rest
    hold theirs), in the site's queue; the scheduler's Service, the policies and the budget as for
    plain Deployments."""
    labels = {"app.kubernetes.io/name": plan.name}
    tasks = []
    for role, replicas in (("scheduler", 1), ("worker", plan.workers)):
        task_labels = {**labels, "app.kubernetes.io/component": role}
        tasks.append({"name": role, "replicas": replicas,
                      "template": {"metadata": {"labels": task_labels},
                                   "spec": {**_pod(plan, role, pull_secret), "restartPolicy": "OnFailure"}}})
    job = {"apiVersion": VOLCANO_API, "kind": "Job",
           "metadata": {"name": plan.name, "labels": {"app.kubernetes.io/part-of": "rapidship"}},
           "spec": {"schedulerName": VOLCANO_SCHEDULER, "queue": plan.queue, "minAvailable": 1 + plan.workers,
                    "tasks": tasks}}
    selector = {**labels, "app.kubernetes.io/component": "scheduler"}
    workers = {**labels, "app.kubernetes.io/component": "worker"}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"{plan.name}-scheduler"},
               "spec": _scheduler_service_spec(plan, selector)}
    return [job, service, *network_policies(plan, selector, workers, operator=False), disruption_budget(plan, workers)]


def _port(number: int, protocol: str = "TCP") -> dict:
    return {"protocol": protocol, "port": number}


def peer(site: Peer) -> dict:
    """Pods with these labels in the namespace of that name: one peer, both selectors (AND)."""
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: site.namespace}},
            "podSelector": {"matchLabels": dict(site.labels)}}


def network_policies(plan: DeployPlan, scheduler: dict, workers: dict, operator: bool) -> list[dict]:
    """Ingress to the scheduler (it runs any client's code) from the cluster's workers and its
    labelled clients on the comm port, their dashboards and the site's Prometheus on the HTTP port
    (and the operator on both); to the workers from the scheduler, each other and the clients (dask
    picks their comm ports), Prometheus on their HTTP port. Egress: DNS, and the cluster's own pods
    (workers to the scheduler's comm port, the scheduler and workers to any worker port); nothing
    else (the spill volume is the kubelet's to mount, no traffic of the pod's)."""
    clients = {"podSelector": {"matchLabels": {CLIENT_LABEL: plan.name}}}
    scheduler_pod, worker_pods = ({"podSelector": {"matchLabels": dict(labels)}} for labels in (scheduler, workers))
    prometheus = peer(plan.prometheus_peer)
    to_scheduler = [{"from": [worker_pods, clients], "ports": [_port(SCHEDULER_PORT)]},
                    {"from": [clients, prometheus], "ports": [_port(SCHEDULER_HTTP)]}]
    if operator:   # by the name label the API server sets: no other namespace can claim it
        to_scheduler.append({"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: plan.operator_namespace}}}],
                             "ports": [_port(SCHEDULER_PORT), _port(SCHEDULER_HTTP)]})
    to_workers = [{"from": [scheduler_pod, worker_pods, clients]}, {"from": [prometheus], "ports": [_port(WORKER_HTTP)]}]
    dns = {"to": [peer(plan.dns_peer)], "ports": [_port(53, "UDP"), _port(53)]}
    from_scheduler = [dns, {"to": [worker_pods]}]
    from_workers = [dns, {"to": [scheduler_pod], "ports": [_port(SCHEDULER_PORT)]}, {"to": [worker_pods]}]
    return [{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
             "metadata": {"name": f"{plan.name}-{role}", "labels": {"app.kubernetes.io/part-of": "rapidship"}},
             "spec": {"podSelector": {"matchLabels": dict(selector)}, "policyTypes": ["Ingress", "Egress"],
                      "ingress": ingress, "egress": egress}}
            for role, selector, ingress, egress in (("scheduler", scheduler, to_scheduler, from_scheduler),
                                                    ("worker", workers, to_workers, from_workers))]


def pod_specs(doc: dict) -> list[tuple[str, dict]]:
    """(where, PodSpec) of every pod a manifest describes (DaskCluster, Deployment, Pod)."""
    kind, name = doc.get("kind"), (doc.get("metadata") or {}).get("name", "?")
    spec = doc.get("spec") or {}
    if kind == "DaskCluster":
        return [(f"DaskCluster {name} {role}", (spec.get(role) or {}).get("spec") or {})
                for role in ("scheduler", "worker")]
    if kind == "Job" and str(doc.get("apiVersion", "")).startswith("batch.volcano.sh/"):
        return [(f"Volcano Job {name} task {t.get('name')}", (t.get("template") or {}).get("spec") or {})
                for t in spec.get("tasks") or []]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return [(f"{kind} {name}", ((spec.get("template") or {}).get("spec")) or {})]
    if kind == "Pod":
        return [(f"Pod {name}", spec)]
    return []
