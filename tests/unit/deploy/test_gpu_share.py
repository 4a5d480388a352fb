"""invoke deploy --gpu-share: each worker asks for a MIG instance, a memory quota or one MPS /
time-slicing replica of a card in the names its scheduler and device plugin read, and is sized by
the doctor's rules for that share; with
--scheduler volcano a Volcano Job, strict-valid against Volcano's own published CRD (test data,
tests/data/volcano/SOURCE.md says where it is from)."""

from __future__ import annotations

import copy

import jsonschema
import pytest
import yaml

from rapidship.deploy import checks, k8s, write
from rapidship.errors import ConfigError
from rapidship.runtime.rules import device_sizes
from support.commands import ROOT
from unit.deploy.test_deploy import as_pod, gpu_variant, matrix, plan, strict  # noqa: F401 - the fixture

GiB, MiB = 2**30, 2**20
VOLCANO_CRD = ROOT / "tests/data/volcano/batch.volcano.sh_jobs.yaml"


def strict_schema(schema):
    """The CRD's schema as the API server's strict field validation reads it: an object that names
    its properties and does not keep unknown fields refuses any other."""
    if isinstance(schema, dict):
        out = {k: strict_schema(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema and \
                not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict_schema(x) for x in schema]
    return schema


@pytest.fixture(scope="module")
def volcano_schema():
    crd = yaml.safe_load(VOLCANO_CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return strict_schema(version["schema"]["openAPIV3Schema"])


def worker_container(docs, kind="Deployment"):
    for doc in docs:
        for where, pod in k8s.pod_specs(doc):
            if where.startswith(kind) and ("worker" in where):
                return pod["containers"][0], pod
    raise AssertionError(f"no {kind} worker")


def flag(args, name):
    return args[args.index(name) + 1]


# ---- the requests and the sizing ----

def test_a_mig_worker_asks_for_the_instance_and_is_sized_to_it_not_the_card(matrix):
    p = plan(matrix, gpu_variant(matrix), gpu_share="mig:1g.10gb")
    for docs in (k8s.plain(p), k8s.dask_cluster(p)):
        kind = "Deployment" if docs is not None and docs[0]["kind"] == "Deployment" else "DaskCluster"
        c, pod = worker_container(docs, kind)
        assert c["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1" == c["resources"]["requests"]["nvidia.com/mig-1g.10gb"]
        assert "nvidia.com/gpu" not in c["resources"]["limits"] and "schedulerName" not in pod
        device, pool = device_sizes(10 * 10**9)
        assert (int(flag(c["args"], "--device-memory-limit")), int(flag(c["args"], "--rmm-pool-size"))) == (device, pool)
        assert device == 8 * 10**9 and pool == 8448 * MiB     # inside a 1g.10gb instance (9.6 GiB and more)


def test_a_memory_quota_asks_hami_by_default_and_volcanos_vgpu_with_volcano(matrix):
    p = plan(matrix, gpu_variant(matrix), gpu_share="memory:30")
    c, _ = worker_container(k8s.plain(p))
    assert c["resources"]["limits"] == {"memory": c["resources"]["limits"]["memory"], "nvidia.com/gpu": "1",
                                        "nvidia.com/gpumem": "30720"}
    assert (int(flag(c["args"], "--device-memory-limit")), int(flag(c["args"], "--rmm-pool-size"))) == (24 * GiB, 27 * GiB)
    v = plan(matrix, gpu_variant(matrix), gpu_share="memory:30", scheduler="volcano", queue="rapids")
    c, pod = worker_container(k8s.plain(v))
    assert {k: c["resources"]["requests"][k] for k in ("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory")} == \
        {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "30720"}
    assert pod["schedulerName"] == "volcano"


def test_the_volcano_job_gang_schedules_the_scheduler_and_workers_in_the_queue(matrix, volcano_schema):
    p = plan(matrix, gpu_variant(matrix), workers=7, gpu_share="mig:1g.5gb", scheduler="volcano", queue="rapids")
    job, service, *rest = k8s.volcano_job(p, pull_secret="harbor-pull")
    assert (job["apiVersion"], job["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
    assert job["spec"]["queue"] == "rapids" and job["spec"]["minAvailable"] == 8
    assert [(t["name"], t["replicas"]) for t in job["spec"]["tasks"]] == [("scheduler", 1), ("worker", 7)]
    worker = job["spec"]["tasks"][1]["template"]
    c = worker["spec"]["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/mig-1g.5gb"] == "1"
    assert int(flag(c["args"], "--device-memory-limit")) == 4 * 10**9
    assert service["spec"]["selector"] == job["spec"]["tasks"][0]["template"]["metadata"]["labels"]
    jsonschema.validate(job, volcano_schema)
    for doc in (service, *rest):
        strict(doc)
    for where, pod in k8s.pod_specs(job):       # the templates as Pods, against Kubernetes' own schema
        strict(as_pod(where.split()[-1], pod))
    assert checks.manifest_problems([job]) == []          # the deploy rules read its tasks too
    assert "volcano-job.yaml" in write.render(p, "k8s")


def test_the_strict_volcano_schema_refuses_what_it_does_not_name(matrix, volcano_schema):
    job = k8s.volcano_job(plan(matrix, gpu_variant(matrix), gpu_share="memory:30", scheduler="volcano"))[0]
    jsonschema.validate(job, volcano_schema)
    for edit in (lambda j: j["spec"].update(minMember=2),                     # PodGroup's field, not the Job's
                 lambda j: j["spec"]["tasks"][0].update(replica=1),
                 lambda j: j["spec"].update(minAvailable="all")):
        bad = copy.deepcopy(job)
        edit(bad)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, volcano_schema)


# ---- MPS and time-slicing: several workers on one card ----

QUARTER_OF_80GB = 19073 * MiB       # 80 GB / 4 in whole MiB: 80 * 10**9 // 4 // MiB
SHARED = [("mps:4x80gb", "nvidia.com/gpu", {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=19073M"}, "mps"),
          ("time-slicing:4x80gb", "nvidia.com/gpu", {"RAPIDS_GPU_SHARE": "time-slicing:4"}, "time-slicing"),
          ("mps:4x80gb:shared", "nvidia.com/gpu.shared", {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=19073M"}, "mps")]


def env_of(container) -> dict:
    return {e["name"]: e.get("value") for e in container["env"]}


@pytest.mark.parametrize("share, resource, env, strategy", SHARED, ids=[s[0] for s in SHARED])
def test_a_replica_worker_asks_for_one_replica_on_nodes_shared_that_way_sized_to_the_cards_share(
        matrix, share, resource, env, strategy):
    assert QUARTER_OF_80GB == 80 * 10**9 // 4 // MiB * MiB
    p = plan(matrix, gpu_variant(matrix), workers=4, gpu_share=share)
    for docs, kind in ((k8s.plain(p), "Deployment"), (k8s.dask_cluster(p), "DaskCluster")):
        c, pod = worker_container(docs, kind)
        assert c["resources"]["limits"] == {"memory": c["resources"]["limits"]["memory"], resource: "1"}
        assert c["resources"]["requests"][resource] == "1"
        device, pool = device_sizes(QUARTER_OF_80GB)
        assert (int(flag(c["args"], "--device-memory-limit")), int(flag(c["args"], "--rmm-pool-size"))) == (device, pool)
        assert (device, pool) == (15999592038, 17152 * MiB)          # 14.90 GiB / 16.75 GiB
        assert {k: v for k, v in env_of(c).items() if k in env} == env
        assert pod["nodeSelector"] == {"kubernetes.io/arch": "amd64", "nvidia.com/gpu.sharing-strategy": strategy,
                                       "nvidia.com/gpu.replicas": "4"}
        # MPS: no /dev/shm of the pod's own (the device plugin mounts the MPS daemon's there)
        assert ("/dev/shm" in [m["mountPath"] for m in c["volumeMounts"]]) == (strategy != "mps")
        assert checks.manifest_problems(docs) == []
    for doc in k8s.plain(p, pull_secret="harbor-pull"):
        strict(doc)
    for where, pod in k8s.pod_specs(k8s.dask_cluster(p)[0]):
        strict(as_pod(where.split()[-1], pod))


@pytest.mark.parametrize("share", ["mps:4x80gb", "time-slicing:4x80gb"])
def test_a_replica_share_under_volcano_is_a_valid_gang_scheduled_job(matrix, volcano_schema, share):
    p = plan(matrix, gpu_variant(matrix), workers=4, gpu_share=share, scheduler="volcano", queue="rapids")
    job, service, *rest = k8s.volcano_job(p)
    jsonschema.validate(job, volcano_schema)
    assert job["spec"]["minAvailable"] == 5 and job["spec"]["queue"] == "rapids"
    worker = job["spec"]["tasks"][1]["template"]["spec"]
    assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"    # the plugin's, not Volcano's vGPU
    assert worker["nodeSelector"]["nvidia.com/gpu.replicas"] == "4" and worker["schedulerName"] == "volcano"
    for where, pod in k8s.pod_specs(job):
        strict(as_pod(where.split()[-1], pod))
    for doc in (service, *rest):
        strict(doc)
    assert checks.manifest_problems([job]) == []


def test_deploy_check_refuses_a_dev_shm_volume_in_an_mps_pod_and_keeps_the_ucx_rule_elsewhere(matrix):
    mps = k8s.plain(plan(matrix, gpu_variant(matrix), gpu_share="mps:4x80gb"))
    ts = k8s.plain(plan(matrix, gpu_variant(matrix), gpu_share="time-slicing:4x80gb"))
    assert checks.manifest_problems(mps) == checks.manifest_problems(ts) == []
    c, pod = worker_container(mps)
    c["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})     # a site's edit: its own /dev/shm back
    pod["volumes"].append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": str(GiB)}})
    (problem,) = checks.manifest_problems(mps)
    assert "shm: a /dev/shm volume on a node sharing its GPUs through MPS hides the MPS daemon's" in problem
    c, pod = worker_container(ts)            # time-slicing has no MPS daemon: a worker still needs its own
    c["volumeMounts"] = [m for m in c["volumeMounts"] if m["mountPath"] != "/dev/shm"]
    (problem,) = checks.manifest_problems(ts)
    assert "shm: a UCX worker without its own /dev/shm" in problem


def test_the_docs_carry_the_worked_example_as_the_rules_compute_it():
    deploy_md, cluster_md = (ROOT / "docs/deploy.md").read_text(), (ROOT / "docs/cluster.md").read_text()
    device, pool = device_sizes(QUARTER_OF_80GB)                 # what deploy passes each worker of mps:4x80gb
    row = f"{device:,} B ({device / GiB:.2f} GiB) / {pool // MiB} MiB"
    assert row == "15,999,592,038 B (14.90 GiB) / 17152 MiB" and row in deploy_md
    limit = f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0={QUARTER_OF_80GB // MiB}M"
    assert limit in deploy_md and limit in cluster_md and f"80 GB / 4 = {QUARTER_OF_80GB // MiB} MiB" in cluster_md
    h100 = 81559 * MiB                                           # NVML's total of an H100 80GB HBM3
    plugin = h100 // 4 // MiB                                    # the plugin's MPS daemon: the card / replicas, MiB
    assert plugin == 20389 and f"{plugin}M" in cluster_md
    ts_device, ts_pool = device_sizes(h100 // 4)                 # the doctor under time-slicing:4 on that card
    doctor = f"{ts_device / GiB:.2f} GiB and {ts_pool / GiB:.2f} GiB"
    assert doctor == "15.93 GiB and 17.75 GiB" and doctor in " ".join(cluster_md.split())
    assert f"{device / GiB:.2f} GiB and {pool / GiB:.2f} GiB" in " ".join(cluster_md.split())


def test_without_a_share_nothing_changes(matrix):
    c, pod = worker_container(k8s.plain(plan(matrix, gpu_variant(matrix))))
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1" and "--rmm-pool-size" not in c["args"]
    assert "schedulerName" not in pod


# ---- refusals ----

@pytest.mark.parametrize("kwargs, where, words", [
    ({"gpu_share": "mig"}, "--gpu-share", "'mig' is no GPU share"),
    ({"gpu_share": "mig:10gb"}, "--gpu-share", "'10gb' is not a MIG profile"),
    ({"gpu_share": "mig:1g.10GB"}, "--gpu-share", "is not a MIG profile"),
    ({"gpu_share": "memory:30Gi"}, "--gpu-share", "'30Gi' is not a whole number of GiB"),
    ({"gpu_share": "memory:0"}, "--gpu-share", "whole number of GiB from 1"),
    ({"gpu_share": "gpu:1"}, "--gpu-share", "is no GPU share"),
    ({"gpu_share": "mps:4"}, "--gpu-share", "'4' is not <replicas>x<card>gb[:shared]"),
    ({"gpu_share": "time:4x80gb"}, "--gpu-share", "'time:4x80gb' is no GPU share"),
    ({"gpu_share": "time-slicing:4x80GiB"}, "--gpu-share", "is not <replicas>x<card>gb"),
    ({"gpu_share": "mps:4x80gb:renamed"}, "--gpu-share", "is not <replicas>x<card>gb[:shared]"),
    ({"gpu_share": "mps:1x80gb"}, "--gpu-share", "1 replicas per card; the device plugin shares a card 2 to 48"),
    ({"gpu_share": "mps:49x80gb"}, "--gpu-share", "49 replicas per card"),
    ({"gpu_share": "mps:8x8gb"}, "--gpu-share", "share of the card is 953 MiB, too little"),
    ({"scheduler": "kueue"}, "--scheduler", "'kueue' is not a scheduler"),
    ({"scheduler": "volcano", "queue": "Team A"}, "--queue", "not a Volcano queue name"),
    ({"queue": "rapids"}, "--queue", "pass --scheduler volcano too"),
])
def test_a_bad_share_scheduler_or_queue_is_one_error_naming_the_flag(matrix, kwargs, where, words):
    with pytest.raises(ConfigError) as err:
        plan(matrix, gpu_variant(matrix), **kwargs)
    assert err.value.where == where and words in str(err.value)


def test_a_cpu_variant_has_no_gpu_to_share(matrix):
    with pytest.raises(ConfigError) as err:
        plan(matrix, "cpu-debian12", gpu_share="memory:30")
    assert err.value.where == "--gpu-share" and "CPU variant" in str(err.value)


# ---- the task ----

IMAGE = "harbor.example/rapids/dask@sha256:" + "c" * 64


def test_invoke_deploy_refuses_a_bad_share_with_exit_2_and_writes_a_good_one(tmp_path):
    import subprocess

    base = ["invoke", "deploy", "--variant", "cuda12-debian12", "--target", "k8s", "--image", IMAGE,
            "--out", str(tmp_path / "out")]
    run = subprocess.run([*base, "--gpu-share", "mig:big"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "--gpu-share: 'mig:big': 'big' is not a MIG profile" in run.stderr
    assert "fix:" in run.stderr and "Traceback" not in run.stderr and not (tmp_path / "out").exists()
    run = subprocess.run([*base, "--gpu-share", "memory:30", "--scheduler", "volcano", "--queue", "rapids"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert "each worker on a 30 GiB quota (volcano.sh/vgpu-number, volcano.sh/vgpu-memory): --device-memory-limit " \
           "24576 MiB, --rmm-pool-size 27648 MiB" in " ".join(run.stderr.split())   # the console wraps lines
    job = next(yaml.safe_load_all((tmp_path / "out" / "volcano-job.yaml").read_text()))
    assert job["kind"] == "Job" and job["spec"]["queue"] == "rapids"
    run = subprocess.run([*base, "--gpu-share", "mps:4x80gb", "--workers", "4"], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert "each worker on MPS: 1 of 4 replicas of the 80 GB card (19073 MiB) (nvidia.com/gpu): --device-memory-limit " \
           "15258 MiB, --rmm-pool-size 17152 MiB" in " ".join(run.stderr.split())
    run = subprocess.run([*base, "--gpu-share", "time-slicing:4x80"], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert run.returncode == 2 and "--gpu-share: 'time-slicing:4x80': '4x80' is not <replicas>x<card>gb" in \
        " ".join(run.stderr.split()) and "Traceback" not in run.stderr
    run = subprocess.run(["invoke", "deploy", "--variant", "cuda12-debian12", "--image", IMAGE, "--gpu-share", "mig:1g.5gb"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "--gpu-share: applies to --target k8s only" in run.stderr
