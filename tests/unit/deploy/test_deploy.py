"""invoke deploy, pure: the plan from a push record and the doctor's rules, the Compose stack and the
Kubernetes manifests it writes (checked against the real schemas: kubernetes-validate --strict, the
Dask operator's DaskCluster CRD), and the rules that refuse a site's bad edit of them."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from rapidship.config.matrix import load_matrix
from rapidship.deploy import checks, compose, k8s
from rapidship.deploy.plan import UCX_SHM, plan_deploy
from rapidship.errors import ConfigError
from rapidship.records import ArchImage, PushRecord
from rapidship.runtime.rules import cap_for_limit
from support.commands import ROOT

MiB, GiB = 2**20, 2**30
INDEX = "sha256:" + "a" * 64


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(ROOT / "variants.yaml")


def pushed(variant: str, arches=("amd64",)) -> PushRecord:
    return PushRecord(variant=variant, registry="harbor.example", repository="rapids/dask", tag="t",
                      index_digest=INDEX, index_media_type="application/vnd.oci.image.index.v1+json",
                      arches={a: ArchImage(arch=a, tag="t", digest="sha256:" + "b" * 64, size=1, media_type="m",
                                           platform={}) for a in arches},
                      gates_skipped=False, pushed_at="now", seconds=1.0)


def plan(matrix, variant="cpu-debian12", workers=2, memory="4g", memory_limit=None, gpus=None, spill=None, **kw):
    return plan_deploy(matrix.get(variant), pushed(variant), "amd64", workers, memory, memory_limit, gpus, spill,
                       1001, **kw)


def gpu_variant(matrix) -> str:
    return next(v.id for v in matrix.variants.values() if v.cuda is not None and any(a.value == "amd64" for a in v.arches))


# ---- the plan ----

def test_the_plan_is_the_pushed_digest_sized_by_the_doctor(matrix):
    p = plan(matrix, memory="1g")
    assert p.image == f"harbor.example/rapids/dask@{INDEX}"            # the index by digest, never the tag
    assert p.memory_limit == 640 * MiB and p.memory_bytes >= cap_for_limit(p.memory_limit)
    assert p.spill_bytes == 2 * p.memory_limit and not p.gpu and p.gpus_per_worker == 0


@pytest.mark.parametrize("kwargs, flag, words", [
    ({"workers": "two"}, "--workers", "not a whole number"),
    ({"workers": 0}, "--workers", "1 to 64"),
    ({"memory": "500m"}, "--memory", "refuses a container below"),
    ({"memory": "1g", "memory_limit": "900m"}, "--memory-limit", "does not fit"),
    ({"spill": "100m"}, "--spill-size", "smaller than one full host tier"),
    ({"gpus": 1}, "--gpus", "CPU variant"),
    ({"memory": "lots"}, "--memory", "not a size"),
])
def test_bad_flags_are_one_error_naming_the_flag(matrix, kwargs, flag, words):
    with pytest.raises(ConfigError) as err:
        plan(matrix, **kwargs)
    assert err.value.where == flag and words in err.value.problem and err.value.fix


def test_a_gpu_worker_drives_one_gpu_and_an_unpushed_arch_or_a_tag_is_refused(matrix):
    g = gpu_variant(matrix)
    p = plan(matrix, g)
    assert p.gpu and p.gpus_per_worker == 1 and p.shm_bytes == UCX_SHM and p.worker_command("w")[:3] == ["dask", "cuda", "worker"]
    with pytest.raises(ConfigError) as err:
        plan(matrix, g, gpus=2)
    assert err.value.where == "--gpus" and "exactly one GPU" in err.value.problem
    with pytest.raises(ConfigError) as err:
        plan_deploy(matrix.get(g), pushed(g), "arm64", 2, "4g", None, None, None, 1001)
    assert err.value.where == "--arch" and "invoke push" in err.value.fix
    with pytest.raises(ConfigError) as err:
        plan_deploy(matrix.get(g), "harbor.example/rapids/dask:26.10", "amd64", 2, "4g", None, None, None, 1001)
    assert err.value.where == "--image" and "not pinned to a digest" in err.value.problem


# ---- Compose ----

def test_the_compose_stack_caps_isolates_and_keeps_the_entrypoint(matrix):
    p = plan(matrix, memory="1g")
    doc = compose.stack(p)
    workers = [s for n, s in doc["services"].items() if "-worker-" in n]
    assert len(workers) == 2 and doc["networks"]["cluster"]["internal"] is True
    for w in workers:
        assert w["mem_limit"] == w["memswap_limit"] == p.memory_bytes and w["user"] == "1001:0"
        assert w["read_only"] and w["cap_drop"] == ["ALL"] and "no-new-privileges:true" in w["security_opt"]
        assert "entrypoint" not in w and "ports" not in w and w["command"][:2] == ["dask", "worker"]
        assert w["volumes"][0].endswith(":/spill") and "ulimits" not in w      # CPU: no memlock asked
    assert len({w["volumes"][0] for w in workers}) == 2                      # a spill volume each
    assert doc["services"]["rapidship-job"]["profiles"] == ["check"]
    gpu = compose.stack(plan(matrix, gpu_variant(matrix)))["services"]["rapidship-worker-1"]
    assert gpu["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["1"]
    assert gpu["ulimits"]["memlock"] == {"soft": -1, "hard": -1} and gpu["shm_size"] == UCX_SHM
    assert checks.compose_problems(doc) == []


def test_compose_edits_that_break_a_rule_are_each_named(matrix):
    doc = compose.stack(plan(matrix, gpu_variant(matrix), memory="8g"))
    w = "rapidship-worker-0"

    def broken(edit) -> list[str]:
        d = copy.deepcopy(doc)
        edit(d["services"][w])
        return checks.compose_problems(d)

    assert broken(lambda s: s.update(entrypoint=["dask"]))[0].startswith(f"service {w}: entrypoint:")
    assert broken(lambda s: s.update(mem_limit="4g"))[0].startswith(f"service {w}: memory: limit")
    assert broken(lambda s: s.update(mem_limit="8g")) == []     # Docker's g is GiB: 8g is the 8 GiB the plan needs
    assert broken(lambda s: s.update(mem_limit="8000m"))[0].startswith(f"service {w}: memory: limit")
    assert broken(lambda s: s.pop("shm_size"))[0].startswith(f"service {w}: shm:")
    assert broken(lambda s: s.update(tmpfs=["/spill:size=8g"]))[0].startswith(f"service {w}: spill: the spill volume is in memory")
    assert broken(lambda s: s.update(entrypoint=["/usr/local/bin/rapids-entrypoint"])) == []


# ---- Kubernetes ----

def crd_schema() -> dict:
    spec = importlib.util.find_spec("dask_kubernetes")
    if spec is None:
        pytest.fail("dask-kubernetes is not installed: scripts/setup installs it (--no-deps) for the operator's CRDs")
    path = Path(spec.submodule_search_locations[0]) / "operator/deployment/helm/dask-kubernetes-operator/crds/daskcluster.yaml"
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


def strict(doc: dict) -> None:
    for version in k8s.KUBERNETES_VERSIONS:
        kubernetes_validate.validate(doc, version, strict=True)


def as_pod(name: str, spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_the_manifests_pass_the_real_schemas(matrix):
    for variant in ("cpu-debian12", gpu_variant(matrix)):
        p = plan(matrix, variant)
        for doc in k8s.plain(p, pull_secret="harbor-pull"):
            strict(doc)
        cluster, *policies = k8s.dask_cluster(p, pull_secret="harbor-pull")
        jsonschema.validate(cluster, crd_schema())
        for doc in policies:
            strict(doc)
        for where, pod in k8s.pod_specs(cluster):      # the operator's CRD keeps pod specs open: check them as Pods
            strict(as_pod(where.split()[-1], pod))


def test_a_strict_schema_check_fails_on_a_misspelt_field(matrix):
    doc = k8s.plain(plan(matrix))[0]
    doc["spec"]["template"]["spec"]["securityContext"]["runAsNonRot"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        strict(doc)
    bad = copy.deepcopy(k8s.dask_cluster(plan(matrix))[0])  # the DaskCluster; the policies follow it
    bad["spec"]["worker"]["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, crd_schema())


def test_pods_are_non_root_read_only_by_digest_with_args_only(matrix):
    p = plan(matrix, gpu_variant(matrix), memory="8g")
    cluster, *_policies = k8s.dask_cluster(p, pull_secret="harbor-pull")
    pod = cluster["spec"]["worker"]["spec"]
    (c,) = pod["containers"]
    assert "command" not in c and c["args"] == p.worker_command("$(DASK_WORKER_NAME)")
    assert c["image"].endswith("@" + INDEX) and pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1001, "runAsGroup": 0, "fsGroup": 0,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert c["securityContext"]["readOnlyRootFilesystem"] and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["resources"]["limits"] == {"memory": str(p.memory_bytes), "nvidia.com/gpu": "1"}
    assert pod["nodeSelector"] == {"kubernetes.io/arch": "amd64"} and pod["imagePullSecrets"] == [{"name": "harbor-pull"}]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["spill"]["emptyDir"]["sizeLimit"] == str(p.spill_bytes)
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": str(UCX_SHM)}
    assert checks.manifest_problems([cluster]) == []


def test_manifest_edits_that_break_a_rule_are_each_named(matrix):
    cluster, *_policies = k8s.dask_cluster(plan(matrix, gpu_variant(matrix), memory="8g"))
    where = "DaskCluster rapidship worker container worker"

    def broken(edit) -> list[str]:
        d = copy.deepcopy(cluster)
        edit(d["spec"]["worker"]["spec"])
        return checks.manifest_problems([d])

    c = lambda pod: pod["containers"][0]  # noqa: E731
    vol = lambda pod, name: next(v for v in pod["volumes"] if v["name"] == name)  # noqa: E731
    assert broken(lambda pod: c(pod).update(command=c(pod)["args"][:3], args=c(pod)["args"][3:]))[0].startswith(
        f"{where}: entrypoint:")
    assert broken(lambda pod: c(pod).update(command=["/usr/local/bin/rapids-entrypoint"])) == []   # through it: fine
    assert broken(lambda pod: c(pod)["resources"]["limits"].update(memory="4Gi"))[0].startswith(f"{where}: memory:")
    assert broken(lambda pod: c(pod)["resources"]["limits"].pop("memory"))[0].startswith(f"{where}: memory: no memory limit")
    assert broken(lambda pod: vol(pod, "spill")["emptyDir"].update(sizeLimit="1Gi"))[0].startswith(f"{where}: spill:")
    assert broken(lambda pod: vol(pod, "spill")["emptyDir"].update(medium="Memory"))[0].startswith(
        f"{where}: spill: the spill volume is in memory")
    assert broken(lambda pod: c(pod).update(volumeMounts=[m for m in c(pod)["volumeMounts"]
                                                          if m["mountPath"] != "/dev/shm"]))[0].startswith(f"{where}: shm:")


def test_quantities_read_as_kubernetes_compose_and_dask_write_them():
    assert [checks.quantity(q) for q in ("4Gi", "4g", "4GiB", "4e9", 512, "1500Mi", "x")] == [
        4 * GiB, 4 * 10**9, 4 * GiB, 4 * 10**9, 512, 1500 * MiB, None]


# ---- Prometheus in the stack, a PVC for the spill volume ----

PROM = "registry.example/prom/prometheus@sha256:" + "c" * 64


def test_the_stack_s_prometheus_scrapes_every_worker_with_the_shipped_rules(matrix, tmp_path):
    import subprocess

    from rapidship.deploy.write import render

    p = plan(matrix, memory="1g", prometheus_image=PROM)
    files = render(p, "compose")
    doc = yaml.safe_load(files["compose.yaml"])
    prom = doc["services"]["rapidship-prometheus"]
    assert prom["profiles"] == ["monitoring"] and prom["image"] == PROM and prom["ports"] == ["127.0.0.1:9090:9090"]
    assert doc["networks"]["cluster"]["internal"] is True and "monitoring" in prom["networks"]
    assert all("ports" not in s for n, s in doc["services"].items() if n != "rapidship-prometheus")
    config = yaml.safe_load(files["prometheus.yml"])
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == ["rapidship-scheduler:8787", "rapidship-worker-0:8788", "rapidship-worker-1:8788"]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    check = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr      # the rules file it names checks too
    # the alert tests, every target labelled as this config labels it: WorkersMissing and the rest fire
    from support import alert_cases

    (tmp_path / "alerts.test.yml").write_text(alert_cases.render(tmp_path / "prometheus.yml"))
    tested = subprocess.run(["promtool", "test", "rules", "alerts.test.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    with pytest.raises(ConfigError) as err:
        plan(matrix, prometheus_image="prom/prometheus:latest")
    assert err.value.where == "--prometheus-image"


def test_a_spill_pvc_per_pod_passes_the_schema_and_its_size_is_checked(matrix):
    p = plan(matrix, memory="8g", spill_storage_class="fast-local")
    cluster, *_policies = k8s.dask_cluster(p)
    pod = cluster["spec"]["worker"]["spec"]
    (spill,) = [v for v in pod["volumes"] if v["name"] == "spill"]
    claim = spill["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "fast-local" and claim["resources"]["requests"]["storage"] == str(p.spill_bytes)
    strict(as_pod("worker", pod))
    for doc in k8s.plain(p):
        strict(doc)
    assert checks.manifest_problems([cluster]) == []
    claim["resources"]["requests"]["storage"] = "1Gi"
    (problem,) = checks.manifest_problems([cluster])
    assert ": spill: the spill volume (1073741824 B) is smaller than one full host tier" in problem


# ---- run-time views round 2: names, the scheduler's API, tokens, policies, pinned images ----

def test_workers_are_named_after_their_deployment_or_pod_and_the_scheduler_serves_the_api(matrix):
    """The operator scales down by retiring workers through /api/v1/retire_workers and deleting the
    Deployments named as the retired workers: a worker named by its address deletes nothing."""
    from rapidship.deploy.plan import ROUTES_ENV

    p = plan(matrix)
    cluster, *_ = k8s.dask_cluster(p)
    worker = cluster["spec"]["worker"]["spec"]["containers"][0]
    args = worker["args"]
    assert args[args.index("--name") + 1] == "$(DASK_WORKER_NAME)"  # the operator sets it to the Deployment's name
    scheduler = cluster["spec"]["scheduler"]["spec"]["containers"][0]
    routes = {e["name"]: e["value"] for e in scheduler["env"]}[ROUTES_ENV]
    assert "distributed.http.scheduler.api" in routes and "distributed.http.scheduler.prometheus" in routes
    deployment = next(d for d in k8s.plain(p) if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-worker"))
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    assert c["args"][c["args"].index("--name") + 1] == "$(POD_NAME)"
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in c["env"]
    stack = compose.stack(p)
    for i in range(p.workers):
        service = stack["services"][compose.worker_name(p, i)]
        assert service["command"][service["command"].index("--name") + 1] == compose.worker_name(p, i)
        assert service["restart"] == "unless-stopped"   # dask ends a worker that lost its scheduler with exit 0
    assert stack["services"][f"{p.name}-scheduler"]["restart"] == "unless-stopped"
    assert "restart" not in stack["services"][f"{p.name}-job"]  # a check that fails must stay failed


def test_no_pod_mounts_a_service_account_token(matrix):
    p = plan(matrix)
    docs = [*k8s.plain(p), *k8s.dask_cluster(p)]
    pods = [pod for doc in docs for _, pod in k8s.pod_specs(doc)]
    assert len(pods) == 4 and all(pod["automountServiceAccountToken"] is False for pod in pods)


def test_kubernetes_takes_only_a_registry_digest_never_a_local_image_id(matrix):
    """`--image sha256:<id>` is fine for Compose on this engine; a kubelet would pull a tag of
    docker.io/library/sha256. deploy refuses it for k8s, and deploy-check refuses it in a manifest."""
    local = plan_deploy(matrix.get("cpu-debian12"), "sha256:" + "c" * 64, "amd64", 2, "4g", None, None, None, 1001)
    assert compose.stack(local)["services"]["rapidship-scheduler"]["image"] == "sha256:" + "c" * 64
    with pytest.raises(ConfigError) as err:
        k8s.plain(local)
    assert err.value.where == "--image" and "docker.io/library/sha256" in err.value.problem
    cluster, *_ = k8s.dask_cluster(plan(matrix))
    cluster["spec"]["worker"]["spec"]["containers"][0]["image"] = "sha256:" + "c" * 64
    problems = checks.manifest_problems([cluster])
    assert any("image: sha256:" in p and "registry" in p for p in problems), problems


# ---- TLS between client, scheduler and workers (k8s, --tls-secret) ----

def test_with_a_tls_secret_every_pod_speaks_tls_with_the_site_certificates(matrix):
    from rapidship.deploy.plan import TLS_DIR

    p = plan(matrix, tls_secret="rapidship-tls")
    cluster, *_ = k8s.dask_cluster(p)
    jsonschema.validate(cluster, crd_schema())
    for docs in (k8s.plain(p), [cluster]):
        pods = [pod for doc in docs for _, pod in k8s.pod_specs(doc)]
        assert len(pods) == 2
        for pod in pods:
            strict(as_pod("p", pod))
            (c,) = pod["containers"]
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] == "True"   # a tcp:// peer is refused
            assert env["DASK_DISTRIBUTED__COMM__TLS__CA_FILE"] == f"{TLS_DIR}/ca.crt"
            for role in ("SCHEDULER", "WORKER", "CLIENT"):
                assert env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__CERT"] == f"{TLS_DIR}/tls.crt"
                assert env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__KEY"] == f"{TLS_DIR}/tls.key"
            (vol,) = [v for v in pod["volumes"] if v["name"] == "tls"]
            assert vol == {"name": "tls", "secret": {"secretName": "rapidship-tls", "defaultMode": 0o440}}
            assert {"name": "tls", "mountPath": TLS_DIR, "readOnly": True} in c["volumeMounts"]
            args = " ".join(c["args"])
            assert ("--protocol tls" in args) if c["name"] == "scheduler" else ("tls://" in args and "tcp://" not in args)
        assert checks.manifest_problems(docs) == []
    plain_pods = [pod for doc in k8s.plain(plan(matrix)) for _, pod in k8s.pod_specs(doc)]
    assert all(v["name"] != "tls" for pod in plain_pods for v in pod["volumes"])   # no Secret: plain tcp
    assert all("--protocol tcp" in " ".join(pod["containers"][0]["args"]) or "tcp://" in " ".join(
        pod["containers"][0]["args"]) for pod in plain_pods)


@pytest.mark.parametrize("name", ["Rapidship_TLS", "-tls", "a/b", "x" * 254])
def test_a_tls_secret_that_is_no_kubernetes_name_is_refused(matrix, name):
    with pytest.raises(ConfigError) as err:
        plan(matrix, tls_secret=name)
    assert err.value.where == "--tls-secret" and "not a Kubernetes Secret name" in err.value.problem
