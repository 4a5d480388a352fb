"""The Kubernetes cluster `invoke deploy --target k8s` writes isolates, probes and heals itself:
NetworkPolicies evaluated as a CNI applies them (tests/support/netpol.py) over the pods the
manifests make, the operator's pods labelled by the operator's own code; probes on the port the
dask command serves; a PodDisruptionBudget asked as the eviction API asks it; CPU requests and
QoS; every object strict-valid for each Kubernetes release the site may run."""

from __future__ import annotations

import copy
import json
import subprocess

import jsonschema
import kubernetes_validate
import pytest
import yaml

from rapidship.config.matrix import load_matrix
from rapidship.deploy import k8s
from rapidship.deploy.plan import SCHEDULER_HTTP, SCHEDULER_PORT, WORKER_HTTP, plan_deploy
from rapidship.errors import ConfigError
from support.commands import ROOT, invoke
from support.netpol import External, Pod, allowed, evictable
from unit.deploy.test_deploy import as_pod, crd_schema

IMAGE = "registry.example/rapids/dask@sha256:" + "a" * 64
SITE = "site"   # the namespace the manifests are applied in
VENV = ROOT / ".venv-operator" / "bin" / "python"
# the Deployments the Dask operator makes of a DaskCluster, by its own functions (dask-kubernetes
# 2026.3.0): the scheduler's and one worker's, as its create handlers call them
OPERATOR = """
import json, sys
from dask_kubernetes.operator.controller import controller as c
cluster = json.load(sys.stdin)
name, labels = cluster["metadata"]["name"], cluster["metadata"].get("labels") or {}
print(json.dumps([c.build_scheduler_deployment_spec(name, cluster["spec"]["scheduler"]["spec"], {}, labels),
                  c.build_worker_deployment_spec(f"{name}-default", "site", name, "0a1b2c",
                                                 cluster["spec"]["worker"]["spec"], {}, labels)]))
"""


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(ROOT / "variants.yaml")


def plan(matrix, variant="cpu-debian12", workers=2, **kw):
    return plan_deploy(matrix.get(variant), IMAGE, "amd64", workers, "4g", None, None, None, 1001, **kw)


def operator_deployments(cluster: dict) -> list[dict]:
    if not VENV.exists():
        pytest.fail("no .venv-operator: scripts/setup makes it (the Dask operator with its dependencies)")
    proc = subprocess.run([str(VENV), "-c", OPERATOR], input=json.dumps(cluster), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def pod(deployment: dict, namespace: str = SITE, ready: bool = True) -> Pod:
    template = deployment["spec"]["template"]
    (c,) = template["spec"]["containers"]
    return Pod(namespace, dict(template["metadata"]["labels"]), {p["name"]: p["containerPort"] for p in c["ports"]},
               ready=ready)


def clusters(p) -> dict[str, tuple[list[dict], Pod, Pod]]:
    """target -> (the objects applied, the scheduler's pod, a worker's pod), for both targets."""
    operated = k8s.dask_cluster(p)
    scheduler, worker = operator_deployments(operated[0])
    plain = k8s.plain(p)
    deployments = {d["metadata"]["name"]: d for d in plain if d["kind"] == "Deployment"}
    return {"operator": (operated[1:], pod(scheduler), pod(worker)),
            "plain": (plain, pod(deployments[f"{p.name}-scheduler"]), pod(deployments[f"{p.name}-worker"]))}


# ---- NetworkPolicies ----

def test_only_the_sites_prometheus_reaches_the_http_ports_not_any_pod_calling_itself_prometheus(matrix):
    for target, (docs, scheduler, worker) in clusters(plan(matrix)).items():
        prometheus = Pod("monitoring", {"app.kubernetes.io/name": "prometheus"})
        assert allowed(docs, SITE, prometheus, scheduler, SCHEDULER_HTTP), target
        assert allowed(docs, SITE, prometheus, worker, WORKER_HTTP), target
        assert not allowed(docs, SITE, prometheus, scheduler, SCHEDULER_PORT), target   # it scrapes, runs no code
        for impostor in (Pod("tenant-a", {"app.kubernetes.io/name": "prometheus"}),     # another namespace
                         Pod("tenant-a", {"app.kubernetes.io/name": "prometheus"},      # a look-alike namespace label
                             namespace_labels={"name": "monitoring"}),
                         Pod(SITE, {"app.kubernetes.io/name": "prometheus"}),           # the cluster's own namespace
                         Pod("monitoring", {"app.kubernetes.io/name": "grafana"})):     # the right namespace, not it
            assert not allowed(docs, SITE, impostor, scheduler, SCHEDULER_HTTP), (target, impostor)
            assert not allowed(docs, SITE, impostor, worker, WORKER_HTTP), (target, impostor)

    site = plan(matrix, prometheus_peer="observability/app=prometheus,prometheus=k8s")
    for target, (docs, scheduler, worker) in clusters(site).items():
        ours = Pod("observability", {"app": "prometheus", "prometheus": "k8s"})
        assert allowed(docs, SITE, ours, scheduler, SCHEDULER_HTTP) and allowed(docs, SITE, ours, worker, WORKER_HTTP)
        for other in (Pod("observability", {"app": "prometheus"}),        # one label of two
                      Pod("monitoring", {"app.kubernetes.io/name": "prometheus"})):   # the default: not this site's
            assert not allowed(docs, SITE, other, scheduler, SCHEDULER_HTTP), (target, other)


def test_egress_is_denied_but_dns_and_the_clusters_own_ports(matrix):
    any_port = 40123   # dask's comm and nanny ports are picked at start
    for tls in (None, "rapidship-tls"):
        for target, (docs, scheduler, worker) in clusters(plan(matrix, tls_secret=tls)).items():
            dns = Pod("kube-system", {"k8s-app": "kube-dns"})
            other_worker = Pod(SITE, dict(worker.labels), dict(worker.ports))
            for source in (scheduler, worker):
                assert allowed(docs, SITE, source, dns, 53, "UDP") and allowed(docs, SITE, source, dns, 53, "TCP")
                assert not allowed(docs, SITE, source, dns, 443)
                assert not allowed(docs, SITE, source, Pod("kube-system", {"k8s-app": "metrics-server"}), 53, "UDP")
                for outside in ("1.1.1.1", "10.96.0.1", "169.254.169.254"):   # internet, API server, metadata
                    assert not allowed(docs, SITE, source, External(outside), 443), (target, source, outside)
                    assert not allowed(docs, SITE, source, External(outside), 80), (target, source, outside)
                assert not allowed(docs, SITE, source, Pod(SITE, {"app": "database"}), 5432)
                assert allowed(docs, SITE, source, other_worker, any_port), (target, source)
            assert allowed(docs, SITE, worker, scheduler, SCHEDULER_PORT), target
            assert not allowed(docs, SITE, worker, scheduler, SCHEDULER_HTTP), target
            # the same labels in another namespace are not the cluster's pods
            stranger = Pod("tenant-a", dict(worker.labels), dict(worker.ports))
            assert not allowed(docs, SITE, stranger, scheduler, SCHEDULER_PORT), target
            assert not allowed(docs, SITE, worker, stranger, any_port), target


def test_clients_and_the_operator_reach_the_scheduler_and_nothing_else_does(matrix):
    p = plan(matrix)
    for target, (docs, scheduler, worker) in clusters(p).items():
        client = Pod(SITE, {k8s.CLIENT_LABEL: p.name})
        assert allowed(docs, SITE, client, scheduler, SCHEDULER_PORT) and allowed(docs, SITE, client, worker, 40123)
        assert allowed(docs, SITE, client, scheduler, SCHEDULER_HTTP)
        assert not allowed(docs, SITE, Pod(SITE, {k8s.CLIENT_LABEL: "another-cluster"}), scheduler, SCHEDULER_PORT)
        assert not allowed(docs, SITE, Pod(SITE, {"app": "anything-else"}), scheduler, SCHEDULER_PORT)
        assert not allowed(docs, SITE, Pod(SITE, {"app": "anything-else"}), worker, 40123)
        operator = Pod(k8s.OPERATOR_NAMESPACE, {"app.kubernetes.io/name": "dask-kubernetes-operator"})
        assert allowed(docs, SITE, operator, scheduler, SCHEDULER_HTTP) == (target == "operator")


def test_the_operator_admitted_is_the_one_in_the_namespace_named_by_operator_namespace(matrix):
    """An operator installed outside `dask-operator` must reach the scheduler (else every scale-down
    stalls on a blocked port); the namespace is matched by its name label, which the API server sets."""
    site = plan(matrix, operator_namespace="platform-dask")
    docs, scheduler, _ = clusters(site)["operator"]
    ours = Pod("platform-dask", {"app.kubernetes.io/name": "dask-kubernetes-operator"})
    assert allowed(docs, SITE, ours, scheduler, SCHEDULER_HTTP) and allowed(docs, SITE, ours, scheduler, SCHEDULER_PORT)
    for other in (Pod(k8s.OPERATOR_NAMESPACE, {"app.kubernetes.io/name": "dask-kubernetes-operator"}),   # the default
                  Pod("tenant-a", {}, namespace_labels={"name": "platform-dask"})):   # a look-alike label
        assert not allowed(docs, SITE, other, scheduler, SCHEDULER_HTTP), other
    assert plan(matrix).operator_namespace == k8s.OPERATOR_NAMESPACE == "dask-operator"   # default unchanged
    with pytest.raises(ConfigError) as err:
        plan(matrix, operator_namespace="Dask_Operator")
    assert err.value.where == "--operator-namespace" and "namespace name" in err.value.problem


def test_the_cli_writes_the_operator_namespace_and_refuses_it_for_compose(tmp_path):
    proc = invoke("deploy", "--variant", "cpu-debian12", "--target", "k8s", "--image", IMAGE, "--out", str(tmp_path),
                  "--operator-namespace", "platform-dask", check=False)
    assert proc.returncode == 0, proc.stderr
    docs = list(yaml.safe_load_all((tmp_path / "daskcluster.yaml").read_text()))
    froms = [peer for d in docs if d["kind"] == "NetworkPolicy" for rule in d["spec"]["ingress"] for peer in rule["from"]]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "platform-dask"}}} in froms
    assert "dask-operator" not in (tmp_path / "daskcluster.yaml").read_text()
    assert "operator namespace platform-dask" in " ".join(proc.stderr.split())
    for target, value in (("compose", "platform-dask"), ("k8s", "bad/name")):
        proc = invoke("deploy", "--variant", "cpu-debian12", "--target", target, "--image", IMAGE, "--out",
                      str(tmp_path / target), "--operator-namespace", value, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "--operator-namespace:" in " ".join(proc.stderr.split())


@pytest.mark.parametrize("value, words", [
    ("monitoring", "names no pod labels"),
    ("monitoring/", "names no pod labels"),
    ("/app=prometheus", "does not start with a namespace name"),
    ("Monitoring/app=prometheus", "does not start with a namespace name"),
    ("monitoring/app", "is not LABEL=VALUE"),
    ("monitoring/app=two words", "is not LABEL=VALUE"),
    ("monitoring/app=prometheus,", "is not LABEL=VALUE"),
])
def test_a_malformed_peer_is_one_error_naming_the_flag(matrix, value, words):
    for flag, kw in (("--prometheus-peer", "prometheus_peer"), ("--dns-peer", "dns_peer")):
        with pytest.raises(ConfigError) as err:
            plan(matrix, **{kw: value})
        assert err.value.where == flag and words in err.value.problem and "NAMESPACE/LABEL=VALUE" in err.value.fix


def test_the_cli_refuses_a_bad_peer_and_a_compose_target_for_it(tmp_path):
    proc = invoke("deploy", "--variant", "cpu-debian12", "--target", "k8s", "--image", IMAGE, "--out", str(tmp_path),
                  "--prometheus-peer", "prometheus", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--prometheus-peer: 'prometheus' names no pod labels" in " ".join(proc.stderr.split())
    proc = invoke("deploy", "--variant", "cpu-debian12", "--image", IMAGE, "--out", str(tmp_path), "--guaranteed",
                  check=False)
    assert proc.returncode == 2 and "--guaranteed: applies to --target k8s only" in " ".join(proc.stderr.split())
    proc = invoke("deploy", "--variant", "cpu-debian12", "--target", "k8s", "--image", IMAGE, "--out", str(tmp_path),
                  "--prometheus-peer", "observability/app=prometheus", check=False)
    assert proc.returncode == 0, proc.stderr
    written = (tmp_path / "plain.yaml").read_text()
    assert "observability" in written and "&id" not in written   # every field in full, no YAML aliases


# ---- probes ----

def _served_port(args: list[str]) -> int:
    """The HTTP port the dask command itself serves (--dashboard-address :PORT)."""
    return int(args[args.index("--dashboard-address") + 1].rsplit(":", 1)[1])


def test_every_pod_probes_health_on_the_port_its_dask_serves_with_a_cold_start_budget(matrix):
    for variant in ("cpu-debian12", next(v.id for v in matrix.variants.values() if v.cuda)):
        p = plan(matrix, variant)
        pods = [spec for doc in [*k8s.plain(p), *k8s.dask_cluster(p)] for _, spec in k8s.pod_specs(doc)]
        assert len(pods) == 4
        for spec in pods:
            (c,) = spec["containers"]
            ports = {x["name"]: x["containerPort"] for x in c["ports"]}
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                get = c[kind]["httpGet"]
                assert get["path"] == "/health" and ports[get["port"]] == _served_port(c["args"]), (c["name"], kind)
                assert get.get("scheme", "HTTP") == "HTTP"   # dask's HTTP ports stay plain with TLS too
            startup, ready, live = (c[k] for k in ("startupProbe", "readinessProbe", "livenessProbe"))
            # a RAPIDS import on a cold node: minutes before the port opens, never a restart for it
            assert startup["periodSeconds"] * startup["failureThreshold"] >= 300
            # a worker busy in a long task gets a minute before liveness restarts it (and loses its data)
            assert live["periodSeconds"] * live["failureThreshold"] >= 60 and live["timeoutSeconds"] >= 5
            assert ready["periodSeconds"] * ready["failureThreshold"] < live["periodSeconds"] * live["failureThreshold"]
    assert {SCHEDULER_HTTP, WORKER_HTTP} == {8787, 8788}


# ---- a drain, and CPU ----

def test_a_drain_evicts_one_worker_at_a_time_and_never_the_last_ones_together(matrix):
    for n in (2, 4):
        for target, (docs, scheduler, worker) in clusters(plan(matrix, workers=n)).items():
            (budget,) = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
            workers = [Pod(SITE, {**worker.labels, "pod": str(i)}, worker.ports) for i in range(n)]
            assert evictable(budget, [*workers, scheduler], scheduler)   # not the scheduler's budget
            # a drain of the node they all run on: evict everything, replacements not Ready yet
            gone = []
            for victim in workers:
                pods = [Pod(SITE, w.labels, w.ports, ready=False) if w in gone else w for w in workers]
                if evictable(budget, pods, victim):
                    gone.append(victim)
            assert len(gone) == 1, (target, n, len(gone))
            # a crash-looping worker (not Ready) never holds a drain up
            sick = [Pod(SITE, w.labels, w.ports, ready=(i != 0)) for i, w in enumerate(workers)]
            assert evictable(budget, sick, sick[0]), target


def _cpu(q: str) -> float:
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def qos_class(spec: dict) -> str:
    """Kubernetes' QoS class of a pod (requests default to the limits where unset)."""
    from rapidship.deploy.checks import quantity

    resources = [c.get("resources") or {} for c in spec["containers"]]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    for r in resources:
        limits = r.get("limits") or {}
        requests = {**limits, **(r.get("requests") or {})}
        if "cpu" not in limits or "memory" not in limits or _cpu(requests["cpu"]) != _cpu(limits["cpu"]) \
                or quantity(requests["memory"]) != quantity(limits["memory"]):
            return "Burstable"
    return "Guaranteed"


def test_pods_request_cpu_and_are_guaranteed_when_the_site_asks(matrix):
    gpu = next(v.id for v in matrix.variants.values() if v.cuda)
    for variant in ("cpu-debian12", gpu):
        for guaranteed, cpu in ((False, None), (True, "3"), (True, "1500m")):
            p = plan(matrix, variant, cpu=cpu, guaranteed=guaranteed)
            for doc in [*k8s.plain(p), *k8s.dask_cluster(p)]:
                for where, spec in k8s.pod_specs(doc):
                    (c,) = spec["containers"]
                    requests, limits = c["resources"]["requests"], c["resources"]["limits"]
                    assert _cpu(requests["cpu"]) > 0 and requests["memory"] == limits["memory"], where
                    if c["name"] == "worker":
                        assert requests["cpu"] == (cpu or "1")
                        if p.gpu:
                            assert requests["nvidia.com/gpu"] == limits["nvidia.com/gpu"] == "1"
                    # without the flag no CPU limit: CFS throttling would stall dask's event loop
                    assert qos_class(spec) == ("Guaranteed" if guaranteed else "Burstable"), where
    for bad in ("0", "-1", "two", "1.2345", "500M"):
        with pytest.raises(ConfigError) as err:
            plan(matrix, cpu=bad)
        assert err.value.where == "--cpu" and "CPU quantity" in err.value.problem


# ---- schemas ----

def test_every_object_is_strict_valid_for_kubernetes_1_29_to_1_35_and_the_operators_crd(matrix):
    assert k8s.KUBERNETES_VERSIONS[0] == "1.29.0" and k8s.KUBERNETES_VERSIONS[-1] == "1.35.0"
    gpu = next(v.id for v in matrix.variants.values() if v.cuda)
    for p in (plan(matrix), plan(matrix, gpu, guaranteed=True, cpu="4", tls_secret="rapidship-tls",
                                 operator_namespace="platform-dask")):
        cluster, *rest = k8s.dask_cluster(p)
        jsonschema.validate(cluster, crd_schema())
        objects = [*k8s.plain(p), *rest, *(as_pod(w.split()[-1], s) for w, s in k8s.pod_specs(cluster))]
        assert {d["kind"] for d in objects} == {"Deployment", "Service", "NetworkPolicy", "PodDisruptionBudget", "Pod"}
        for version in k8s.KUBERNETES_VERSIONS:
            for doc in objects:
                kubernetes_validate.validate(doc, version, strict=True)
    bad = copy.deepcopy(k8s.plain(plan(matrix)))
    bad[0]["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["failureTreshold"] = 30
    budget = next(d for d in bad if d["kind"] == "PodDisruptionBudget")
    budget["spec"]["unhealthyPodEvictionPolcy"] = "AlwaysAllow"
    for doc in (bad[0], budget):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(doc, "1.29.0", strict=True)
