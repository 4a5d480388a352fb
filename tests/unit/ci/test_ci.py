"""The generated child pipeline and the root pipeline: GitLab's schema, the needs: DAG, the
rules, and that every script line is an invoke task."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import yaml

from rapidship.ci import pipeline as ci
from rapidship.errors import ConfigError
from rapidship.config.matrix import Arch, load_matrix

from support.commands import ROOT  # noqa: E402
SCHEMA = ROOT / "tests" / "fixtures" / "gitlab-ci.schema.json"
KEYWORDS = {"stages", "variables", "default", "include", "workflow", "image", "services", "cache",
            "before_script", "after_script"}


@pytest.fixture(scope="module")
def validator():
    return jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(ROOT / "variants.yaml")


PROFILES = {"production-buildctl": lambda: ci.production(ci.Builder.buildctl),
            "production-kaniko": lambda: ci.production(ci.Builder.kaniko),
            "production-unprotected": lambda: ci.production(refs="unprotected"),
            "local": lambda: ci.local("127.0.0.1:5000/staging")}


def _jobs(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in KEYWORDS and not k.startswith(".")}


def _needs(job: dict) -> list[str]:
    return [n if isinstance(n, str) else n["job"] for n in job.get("needs", [])]


def _schema_errors(validator, doc) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message[:160]}" for e in validator.iter_errors(doc)]


@pytest.mark.parametrize("name", PROFILES)
def test_generated_pipeline_validates_against_gitlab_schema(validator, matrix, name):
    profile = PROFILES[name]()
    ids = ["cpu-debian12", "cuda12-debian12"] if profile.name == "local" else None
    text = ci.to_yaml(ci.pipeline(matrix, profile, ids), ci.descriptions(matrix, profile, ids))
    assert _schema_errors(validator, yaml.safe_load(text)) == []


def test_schema_rejects_a_broken_pipeline(validator, matrix):
    """The schema check can fail: an empty tags list and an unknown retry reason are errors."""
    doc = ci.pipeline(matrix, ci.production())
    doc["build:cpu-debian12:amd64"]["tags"] = []
    doc["default"]["retry"]["when"] = ["cosmic_rays"]
    errors = _schema_errors(validator, doc)
    assert any(e.startswith("build:cpu-debian12:amd64.tags") for e in errors)
    assert any("retry" in e for e in errors)


def test_root_pipeline_and_includes_validate(validator):
    root = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    assert _schema_errors(validator, root) == []
    included = [ROOT / i["local"] for i in root["include"]]
    assert included and all(p.is_file() for p in included)
    merged = dict(root)
    for path in included:
        part = yaml.safe_load(path.read_text())
        assert _schema_errors(validator, part) == [], path
        merged.update(part)
    assert _schema_errors(validator, merged) == []
    jobs = _jobs(merged)
    for name, job in jobs.items():
        assert job.get("stage") in root["stages"], name
        for dep in _needs(job):
            assert dep in jobs, f"{name} needs unknown job {dep}"
    # each trigger reads the very file its generate job writes and keeps as an artifact, the file
    # of its kind of ref, and both run on exactly the refs of that kind
    triggers = {n: j for n, j in jobs.items() if "trigger" in j}
    assert set(triggers) == {"images", "images-unprotected"}
    for name, job in triggers.items():
        include = job["trigger"]["include"][0]
        generate, artifact = jobs[include["job"]], include["artifact"]
        refs = "protected" if name == "images" else "unprotected"
        assert artifact == ci.CHILD_PIPELINES[refs] and job["trigger"]["strategy"] == "depend"
        assert f"invoke ci.generate --refs {refs} --out {artifact}" in generate["script"]
        assert f"invoke ci.runners --pipeline {artifact} --offline" in generate["script"]
        assert artifact in generate["artifacts"]["paths"] and generate["rules"] == job["rules"]
        assert job["variables"] == {"PARENT_PIPELINE_ID": "$CI_PIPELINE_ID"}
    assert ci.GENERATE_JOB == triggers["images"]["trigger"]["include"][0]["job"]
    assert jobs["generate"]["tags"] == ["amd64", ci.PROTECTED_RUNNER_TAG]
    assert ci.PROTECTED_RUNNER_TAG not in jobs["generate-unprotected"]["tags"]


def _all_scripts(doc: dict):
    for name, job in _jobs(doc).items():
        for line in job.get("script", []):
            yield name, line


@pytest.mark.parametrize("name", PROFILES)
def test_every_script_line_is_an_invoke_task(matrix, name):
    lines = list(_all_scripts(ci.pipeline(matrix, PROFILES[name](), ["cpu-debian12"])))
    assert lines
    # arguments may name CI variables ($NAME, or "$NAME/rest" quoted), nothing else of the shell: no
    # pipes, lists, substitutions
    plain = r"invoke [a-z][a-z.-]*( ([^\s;&|`$<>()]+|\$[A-Z_]+|\"[^\"$`]*\"|\"\$[A-Z_]+[^\s\"$`;&|<>()\\]*\"))*"
    bad = [(job, line) for job, line in lines if not re.fullmatch(plain, line)]
    assert bad == []
    for logic in ("invoke build && docker push x", "invoke scan --out $(pwd)", "invoke push | tee log", "docker build .",
                  'invoke verify --image "$(cat x)"', 'invoke verify --key "$A;rm -rf /"', 'invoke verify --key "$A$B"'):
        assert not re.fullmatch(plain, logic), logic


def test_root_scripts_are_invoke_tasks():
    for path in [ROOT / ".gitlab-ci.yml", *sorted((ROOT / "ci").glob("*.yml"))]:
        for job, line in _all_scripts(yaml.safe_load(path.read_text())):
            assert line.startswith("invoke "), (path.name, job, line)


def test_needs_dag_stays_inside_a_variant(matrix):
    """One variant's failure holds no other: no job needs a job of another variant, and every
    need points backwards in the stage order."""
    doc = ci.pipeline(matrix, ci.production())
    shared = {ci.REPORT_JOB, ci.RUNNERS_JOB}  # the jobs over all variants: the report, last; the runner check
    jobs = {n: j for n, j in _jobs(doc).items() if n not in shared}
    assert len({n.split(":")[1] for n in jobs}) == len(matrix.variants)
    for name, job in jobs.items():
        variant = name.split(":")[1]
        for dep in _needs(job):
            if dep == ci.RUNNERS_JOB:
                assert doc["stages"].index(doc[dep]["stage"]) < doc["stages"].index(job["stage"]), name
                continue
            assert dep in jobs, f"{name} needs unknown {dep}"
            assert dep.split(":")[1] == variant, f"{name} waits on another variant's {dep}"
            assert doc["stages"].index(jobs[dep]["stage"]) <= doc["stages"].index(job["stage"])


@pytest.mark.parametrize("name", PROFILES)
def test_release_report_runs_last_after_everything_and_is_exposed(validator, matrix, name):
    """One `report` job in the last stage: no needs (so it waits for every stage and takes every
    job's artifacts), runs also after failures, and GitLab links its page from the merge request."""
    profile = PROFILES[name]()
    ids = ["cpu-debian12"] if profile.name == "local" else None
    doc = ci.pipeline(matrix, profile, ids)
    job = doc[ci.REPORT_JOB]
    assert doc["stages"][-1] == job["stage"] == "report"
    assert [n for n, j in _jobs(doc).items() if j["stage"] == "report"] == [ci.REPORT_JOB]
    assert "needs" not in job and "dependencies" not in job
    if profile.refs is None:
        assert "rules" not in job and job["when"] == "always"
    else:  # GitLab refuses a job-level when: beside rules: the ref gate, then always
        assert "when" not in job and job["rules"][-1] == {"when": "always"} and len(job["rules"]) == 2
    assert job["script"] == ["invoke report --out build/report"]
    artifacts = job["artifacts"]
    assert artifacts["expose_as"] == "release report" and artifacts["when"] == "always"
    # GitLab's expose_as rules: plain paths (no glob, variable or ./), a folder ends in /
    assert artifacts["paths"] == ["build/report/"]
    assert not any(re.search(r"[*?$\[]|^\./", p) for p in artifacts["paths"])
    assert _schema_errors(validator, doc) == []
    broken = {**doc, ci.REPORT_JOB: {**job, "artifacts": {**artifacts, "expose_as": ["not", "a", "string"]}}}
    assert any(e.startswith("report.artifacts.expose_as") for e in _schema_errors(validator, broken))
    if profile.shell:
        assert "tags" not in job
    else:  # no engine needed: records in, a page out; on protected refs on the protected pool
        assert job["tags"] == ["amd64", *([ci.PROTECTED_RUNNER_TAG] if profile.refs == "protected" else [])]
    # every record path the report reads is an artifact of an earlier job, or the report names it
    # as not run: the jobs that write records all keep them
    kept = {p for j in _jobs(doc).values() for p in j.get("artifacts", {}).get("paths", [])}
    assert "build/cpu-debian12/gates-amd64.json" in kept and "build/smoke/" in kept 
    assert "export/cpu-debian12/" in kept or profile.refs == "unprotected"  # no export there
    text = ci.to_yaml(doc, ci.descriptions(matrix, profile, ids))
    assert "# @Description release report of every variant and arch" in text


def test_manifest_merge_waits_for_every_arch(matrix):
    doc = ci.pipeline(matrix, ci.production())
    for v in matrix.variants.values():
        needs = set(_needs(doc[f"push:{v.id}"]))
        for a in v.arches:
            assert {f"gates:{v.id}:{a.value}", f"scan:{v.id}:{a.value}", f"build:{v.id}:{a.value}"} <= needs


def test_build_jobs_run_on_arch_runners_with_rootless_buildkit(matrix):
    doc = ci.pipeline(matrix, ci.production())
    arm = doc["build:cuda12-ubuntu22:arm64"]
    assert arm["tags"] == ["arm64", ci.PROTECTED_RUNNER_TAG]
    assert arm["image"]["name"] == "$RAPIDSHIP_BUILDKIT_IMAGE"
    assert arm["script"] == ["invoke ci.build --variant cuda12-ubuntu22 --arch arm64"]
    assert doc["variables"]["RAPIDSHIP_BUILDER"] == "buildctl"
    assert doc["variables"]["RAPIDSHIP_CACHE_REPO"].startswith("$HARBOR_HOST/")
    # later jobs run where an engine is, and pull the candidate the build pushed
    assert doc["gates:cuda12-ubuntu22:arm64"]["tags"] == ["arm64", "docker", ci.PROTECTED_RUNNER_TAG]
    mr = ci.pipeline(matrix, ci.production(refs="unprotected"))
    assert mr["build:cuda12-ubuntu22:arm64"]["tags"] == ["arm64"]
    assert mr["gates:cuda12-ubuntu22:arm64"]["tags"] == ["arm64", "docker"]
    assert doc["gates:cuda12-ubuntu22:arm64"]["script"][0] == "invoke ci.pull --variant cuda12-ubuntu22 --arch arm64"
    kaniko = ci.pipeline(matrix, ci.production(ci.Builder.kaniko))
    assert kaniko["build:cpu-debian12:amd64"]["image"]["name"] == "$RAPIDSHIP_KANIKO_IMAGE"
    assert kaniko["variables"]["RAPIDSHIP_BUILDER"] == "kaniko"


def test_harbor_scans_what_was_pushed_before_promotion(matrix):
    doc = ci.pipeline(matrix, ci.production())
    job = doc["harbor-gate:cpu-debian12"]
    assert job["needs"][0] == "push:cpu-debian12" and job["script"] == ["invoke harbor.scan --variant cpu-debian12"]
    # the records it checks against the pushed image come with it (build, gates, scan of every arch)
    assert {"build:cpu-debian12:amd64", "gates:cpu-debian12:arm64", "scan:cpu-debian12:amd64"} <= set(job["needs"])
    # the robot of the ref: `ci` on protected refs, `mr` elsewhere (the other file), as the Harbor API user
    assert job["rules"][-1]["variables"]["RAPIDSHIP_HARBOR_PASSWORD"] == "$HARBOR_CI_ROBOT_SECRET"
    mr = ci.pipeline(matrix, ci.production(refs="unprotected"))["harbor-gate:cpu-debian12"]
    assert mr["rules"][-1]["variables"]["RAPIDSHIP_HARBOR_PASSWORD"] == "$HARBOR_MR_ROBOT_SECRET"
    assert "variables" not in job and "RAPIDSHIP_REGISTRY_PASSWORD" not in yaml.safe_dump(job)
    assert "harbor-gate:cpu-debian12" in _needs(doc["promote:cpu-debian12"])


def test_scan_publishes_gitlab_reports(matrix):
    job = ci.pipeline(matrix, ci.production())["scan:cpu-debian12:arm64"]
    reports = job["artifacts"]["reports"]
    assert reports["container_scanning"] == ["build/cpu-debian12/scan-arm64/gl-container-scanning-report.json"]
    assert reports["cyclonedx"] == ["build/cpu-debian12/scan-arm64/sbom.cdx.json"]
    assert job["script"][-1] == ("invoke scan --variant cpu-debian12 --arch arm64 --out build/cpu-debian12/scan-arm64 "
                                 "--db-repository $TRIVY_DB_REPOSITORY")
    assert job["artifacts"]["when"] == "always"  # the report is published even when the gate says no
    assert "TRIVY_DB_REPOSITORY" in ci.pipeline(matrix, ci.production())["variables"]


def test_smoke_needs_a_gpu_runner_and_is_skipped_without_one(matrix):
    prod = ci.pipeline(matrix, ci.production())
    smoke = prod["smoke:cuda12-ubuntu22:arm64"]
    assert smoke["tags"] == ["gpu", "arm64", ci.PROTECTED_RUNNER_TAG]
    assert smoke["script"][-1] == "invoke smoke --variant cuda12-ubuntu22 --arch arm64 --mode gpu --gpus all"
    assert prod["smoke:cpu-debian12:amd64"]["script"][-1] == "invoke smoke --variant cpu-debian12 --arch amd64"
    assert "RAPIDSHIP_GPU_RUNNERS" not in prod["variables"]
    local = ci.pipeline(matrix, ci.local(), ["cpu-debian12"])
    assert local["variables"]["RAPIDSHIP_GPU_RUNNERS"] == ci.NO_GPU
    assert prod["smoke:cpu-debian12:amd64"]["rules"][1] == local["smoke:cpu-debian12:amd64"]["rules"][0]
    assert local["smoke:cpu-debian12:amd64"]["rules"][0] == {"if": f'$RAPIDSHIP_GPU_RUNNERS == "{ci.NO_GPU}"',
                                                           "when": "never"}


def test_release_on_tags_only_and_not_interruptible(matrix):
    doc = ci.pipeline(matrix, ci.production())
    robots = {"promote": ci.PROMOTE_ROBOT, "export": ci.CI_ROBOT}
    for stage in ("promote", "export"):
        job = doc[f"{stage}:cpu-debian12"]
        # protected tags only: an unprotected tag gets no protected variable, so no release either
        assert job["rules"] == [{"if": ci.UNPROTECTED_REF, "when": "never"},
                                {"if": '$CI_COMMIT_TAG && $CI_COMMIT_REF_PROTECTED == "true"',
                                 "variables": robots[stage]}, {"when": "never"}]
        assert job["interruptible"] is False
        assert job["tags"] == ["amd64", "docker", ci.RELEASE_TAG]
    assert doc["default"]["interruptible"] is True
    assert doc["default"]["retry"] == {"max": 2, "when": ["runner_system_failure"]}
    assert not any("retry" in job for job in _jobs(doc).values())
    # least privilege: the promote job alone declares the environment its robot is scoped to, and
    # no secret is a pipeline variable
    assert doc["promote:cpu-debian12"]["environment"] == {"name": ci.RELEASE_ENVIRONMENT}
    assert [n for n, j in _jobs(doc).items() if (j.get("environment") or {}).get("name") == ci.RELEASE_ENVIRONMENT] \
        == [f"promote:{vid}" for vid in matrix.variants]
    assert not [k for k, val in doc["variables"].items() if re.search("USER|PASSWORD|SECRET|TOKEN", k + str(val))]


def test_local_profile_shares_job_definitions(matrix):
    """Same jobs, needs, stages, rules and artifacts; only executor, builder and registry differ."""
    prod = _jobs(ci.pipeline(matrix, ci.production(), ["cpu-debian12"]))
    local = _jobs(ci.pipeline(matrix, ci.local(), ["cpu-debian12"]))
    # no Harbor here, and one shell executor: no runner to check, no robots in environments
    assert set(local) == set(prod) - {"harbor-gate:cpu-debian12", ci.RUNNERS_JOB}
    conditions = {"sign:cpu-debian12": "$RAPIDSHIP_SIGNING_KEY", "verify:cpu-debian12": "$RAPIDSHIP_SIGNING_KEY",
                  "promote:cpu-debian12": "$CI_COMMIT_TAG", "export:cpu-debian12": "$CI_COMMIT_TAG"}
    for name, job in local.items():
        assert "tags" not in job or job["stage"] == "smoke", name
        assert "image" not in job and "environment" not in job
        for key in ("stage", "interruptible"):
            assert job.get(key) == prod[name].get(key), (name, key)
        if name in conditions:  # no protected refs under gitlab-ci-local: the key, or a tag, decides
            assert job["rules"] == [{"if": conditions[name], "when": "on_success"}, {"when": "never"}], name
        else:  # the production rules without the ref gate and the robot: the same `never` conditions first
            nevers = [r for r in prod[name].get("rules", []) if r.get("when") == "never"
                      and r.get("if") != ci.UNPROTECTED_REF]
            assert job.get("rules", []) == (nevers + [{"when": "on_success"}] if nevers else []), name
        assert _needs(job) == [n for n in _needs(prod[name]) if not n.startswith("harbor-gate:")
                               and n != ci.RUNNERS_JOB], name
    assert local["build:cpu-debian12:amd64"]["script"] == [
        "invoke base --os debian12 --arch amd64", "invoke build --variant cpu-debian12 --arch amd64"]
    assert not any("ci.pull" in line for _, line in _all_scripts(local))
    # the trivy DB: Harbor's mirror in production, a DB written from planted advisories locally
    assert local["scan:cpu-debian12:amd64"]["script"] == [
        "invoke trivy-db --advisories ci/local-advisories.yaml --cache-dir build/trivy-cache",
        "invoke scan --variant cpu-debian12 --arch amd64 --out build/cpu-debian12/scan-amd64 "
        "--cache-dir build/trivy-cache --skip-db-update --offline-scan"]
    assert (ROOT / "ci" / "local-advisories.yaml").is_file()


def test_profiles_refuse_what_they_cannot_do(matrix):
    with pytest.raises(ConfigError, match="loopback"):
        ci.local("harbor.example.internal/staging")
    with pytest.raises(ConfigError, match="Debian-family"):
        ci.pipeline(matrix, ci.local(), ["cuda12-kylin10"])
    with pytest.raises(ConfigError, match="none of this profile's arches"):
        amd64_only = matrix.variants["cuda12-debian12"].model_copy(update={"arches": (Arch.amd64,)})
        narrowed = matrix.model_copy(update={"variants": {**matrix.variants, "cuda12-debian12": amd64_only}})
        ci.pipeline(narrowed, ci.local(arches=(Arch.arm64,)), ["cuda12-debian12"])
    with pytest.raises(ConfigError, match="without a docker daemon"):
        ci.production(ci.Builder.docker)


def test_yaml_carries_gitlab_ci_local_descriptions(matrix):
    profile = ci.local()
    text = ci.to_yaml(ci.pipeline(matrix, profile, ["cpu-debian12"]), ci.descriptions(matrix, profile, ["cpu-debian12"]))
    assert re.search(r"# @Description spill smoke .*skipped when RAPIDSHIP_GPU_RUNNERS=none.*\nsmoke:cpu-debian12:amd64:",
                     text)
    assert yaml.safe_load(text) == ci.pipeline(matrix, profile, ["cpu-debian12"])


@pytest.mark.parametrize("name", ["buildkit", "tools"])
def test_ci_job_images_pass_hadolint(name):
    from rapidship.render.lint import lint

    report = lint(ROOT / "ci" / "images" / f"{name}.Dockerfile", ROOT / ".hadolint.yaml")
    assert report.passed, report.findings


@pytest.mark.parametrize("value,problem", [
    ("robot:s3cr3t@127.0.0.1:5000/staging", "carries credentials"),
    ("https://robot:s3cr3t@127.0.0.1:5000/staging", "carries credentials"),
    ("127.0.0.1:5000/staging?token=s3cr3t", "carries a query string"),
    ("127.0.0.1:99999/staging", "port 99999 is not 1-65535"),
    ("127.0.0.1:5000", "names no project"),
    ("127.0.0.1:5000/Bad Project", "names no project"),
    ("https://127.0.0.1:5000/staging", "names a scheme"),
])
def test_registry_values_are_checked_and_secrets_never_echoed(value, problem):
    with pytest.raises(ConfigError, match=problem) as err:
        ci.local(value)
    assert err.value.where == "--registry" and "s3cr3t" not in err.value.message


def test_flags_a_profile_does_not_use_are_refused_not_ignored():
    with pytest.raises(ConfigError, match="production profile pushes to the Harbor project"):
        ci.profile_for("production", registry="127.0.0.1:5000/staging")
    with pytest.raises(ConfigError, match="local profile builds with this machine's Docker engine"):
        ci.profile_for("local", builder="kaniko")
    with pytest.raises(ConfigError, match="is not production or local"):
        ci.profile_for("staging")
    assert ci.profile_for("production", "kaniko").builder is ci.Builder.kaniko
    assert ci.profile_for("local").registry == "127.0.0.1:5000/staging"
    with pytest.raises(ConfigError, match="production profile builds every arch"):
        ci.profile_for("production", arches=(Arch.amd64,))
    with pytest.raises(ConfigError, match="is not protected or unprotected"):
        ci.profile_for("production", refs="merge-request")
    with pytest.raises(ConfigError, match="no protected refs"):
        ci.profile_for("local", refs="protected")
    assert ci.profile_for("production").refs == "protected"
    assert ci.profile_for("production", refs="unprotected").refs == "unprotected"


def test_local_arch_builds_one_arch_and_pushes_only_it(matrix):
    """`invoke ci.generate --profile local --arch amd64` (docs/ci.md): no arm64 job, and push names
    the arch (it wants every arch of the variant otherwise)."""
    doc = ci.pipeline(matrix, ci.profile_for("local", arches=(Arch.amd64,)), ["cpu-debian12"])
    assert not [name for name in doc if name.endswith(":arm64")]
    assert doc["push:cpu-debian12"]["script"][-1].endswith("--no-sign --arch amd64")
    every = ci.pipeline(matrix, ci.local(), ["cpu-debian12"])
    assert "--arch" not in every["push:cpu-debian12"]["script"][-1]


# ---- signing ----

def _variant(matrix, vid="cpu-debian12"):
    return matrix.variants[vid]


def test_sign_follows_push_and_verify_gates_promote_and_export(matrix):
    doc = ci.pipeline(matrix, ci.production())
    v = _variant(matrix)
    arches = [a.value for a in v.arches]
    push, sign, verify = doc["push:cpu-debian12"], doc["sign:cpu-debian12"], doc["verify:cpu-debian12"]
    # push leaves signing to the one job that gets the key
    assert push["script"][-1] == "invoke push --variant cpu-debian12 --registry $RAPIDSHIP_REGISTRY --no-sign"
    # sign: after push, with every record it checks against the registry as an artifact of a job it needs
    assert _needs(sign)[-2:] == ["push:cpu-debian12", ci.RUNNERS_JOB]
    assert set(_needs(sign)) == {"render:cpu-debian12", "push:cpu-debian12", ci.RUNNERS_JOB,
                                 *(f"{s}:cpu-debian12:{a}" for s in ("build", "gates", "scan") for a in arches)}
    for a in arches:
        gates = doc[f"gates:cpu-debian12:{a}"]["artifacts"]["paths"]
        assert {f"build/cpu-debian12/content-{a}.json", f"build/cpu-debian12/build-{a}.json"} <= set(gates)
        scan = doc[f"scan:cpu-debian12:{a}"]["artifacts"]["paths"]
        assert f"build/cpu-debian12/scan-{a}/" in scan  # decision.json and the SBOM
    assert sign["script"] == ["invoke sign --variant cpu-debian12"]
    assert sign["artifacts"]["paths"] == ["build/cpu-debian12/sign.json", "build/cpu-debian12/signed/"]
    assert sign["environment"] == {"name": "ci-signing", "action": "prepare"}
    assert verify["environment"] == {"name": "ci-staging", "action": "access"}
    assert sign["stage"] == verify["stage"] == "publish"
    assert sign["tags"] == ["amd64", ci.RELEASE_TAG] and verify["tags"] == ["amd64", ci.PROTECTED_RUNNER_TAG]
    # on protected refs only: elsewhere GitLab hands out no protected variable, so no key
    rules = [{"if": ci.UNPROTECTED_REF, "when": "never"},
             {"if": '$CI_COMMIT_REF_PROTECTED == "true"', "variables": ci.CI_ROBOT}, {"when": "never"}]
    assert sign["rules"] == verify["rules"] == rules
    # verify: the digest push recorded (push.json, not the tag's current target), the public key, the policy
    assert _needs(verify) == ["push:cpu-debian12", "sign:cpu-debian12"]
    assert verify["script"] == ['invoke verify --variant cpu-debian12 '
                                '--key "$RAPIDSHIP_SIGNING_PUBLIC_KEY" --policy policy/trivy.yaml']
    assert (ROOT / "policy" / "trivy.yaml").is_file()
    # promote and export wait for verify wherever it runs; promote verifies the staged digest itself too
    promote, export = doc["promote:cpu-debian12"], doc["export:cpu-debian12"]
    assert {"job": "verify:cpu-debian12", "optional": True} in promote["needs"]
    assert promote["script"] == ['invoke promote --variant cpu-debian12 --key "$RAPIDSHIP_SIGNING_PUBLIC_KEY"']
    assert {"job": "verify:cpu-debian12", "optional": True} in export["needs"]
    assert {"job": "sign:cpu-debian12", "optional": True} in export["needs"]  # signature objects for the disc
    assert "promote:cpu-debian12" in _needs(export)
    assert export["script"][-1] == ('invoke export-verify --from export/cpu-debian12 '
                                    '--key "$RAPIDSHIP_SIGNING_PUBLIC_KEY"')
    order = list(_jobs(doc))
    assert order.index("push:cpu-debian12") < order.index("sign:cpu-debian12") < order.index("verify:cpu-debian12") \
        < order.index("promote:cpu-debian12") < order.index("export:cpu-debian12")
    for vid in matrix.variants:  # every variant gets the pair
        assert _needs(doc[f"verify:{vid}"]) == [f"push:{vid}", f"sign:{vid}"] and f"push:{vid}" in _needs(doc[f"sign:{vid}"])


def test_signing_variables_match_the_tasks_and_no_secret_reaches_the_yaml(matrix):
    from rapidship.sign.keys import KEY_ENV, PASSWORD_ENV

    assert (ci.SIGNING_KEY, ci.SIGNING_PASSWORD) == (KEY_ENV, PASSWORD_ENV[0])  # the names the tasks read
    roots = [yaml.safe_load(p.read_text()) for p in [ROOT / ".gitlab-ci.yml", *sorted((ROOT / "ci").glob("*.yml"))]]
    for name in PROFILES:
        profile = PROFILES[name]()
        ids = ["cpu-debian12", "cuda12-debian12"] if profile.name == "local" else None
        doc = ci.pipeline(matrix, profile, ids)
        text = ci.to_yaml(doc, ci.descriptions(matrix, profile, ids))
        scripts = [line for _, line in _all_scripts(doc)]
        # the private key and its password are read from the environment by the tasks: never an
        # argument (argv is world-readable), never aliased in `variables:` (a file variable
        # aliased there expands to its content)
        assert not [line for line in scripts if re.search(r"PASSWORD|SECRET|SIGNING_KEY", line)]
        blocks = [doc["variables"], *(job.get("variables", {}) for job in _jobs(doc).values())]
        assert not [k for b in blocks for k, val in b.items() if "SIGNING" in k or "SIGNING" in str(val)]
        assert ci.SIGNING_PASSWORD not in yaml.safe_dump(doc)
        # nothing traces the shell or the runner: no set -x, no CI_DEBUG_TRACE, no before/after scripts
        for part in [doc, *roots]:
            dumped = yaml.safe_dump(part)
            assert "set -x" not in dumped and "CI_DEBUG" not in dumped and "before_script" not in dumped
            assert "after_script" not in dumped
        if profile.refs == "unprotected":  # no key there: no job that signs, none that names it
            assert "sign:" not in text and ci.SIGNING_PASSWORD not in text
            continue
        assert "# @Description sign cpu-debian12" in text
        assert all(v in text for v in (ci.SIGNING_KEY, ci.SIGNING_PASSWORD, ci.SIGNING_PUBLIC_KEY))  # documented


def test_local_profile_signs_when_a_key_is_given_and_says_so_when_not(matrix):
    profile = ci.local()
    doc = ci.pipeline(matrix, profile, ["cpu-debian12"])
    rules = [{"if": "$RAPIDSHIP_SIGNING_KEY", "when": "on_success"}, {"when": "never"}]
    assert doc["sign:cpu-debian12"]["rules"] == doc["verify:cpu-debian12"]["rules"] == rules
    assert doc["gates:cpu-debian12:amd64"]["artifacts"]["paths"] == [
        "build/cpu-debian12/gates-amd64.json", "build/cpu-debian12/content-amd64.json"]  # build record: build job's
    assert doc["verify:cpu-debian12"]["script"][0].startswith('invoke verify --variant cpu-debian12 ')
    text = ci.to_yaml(doc, ci.descriptions(matrix, profile, ["cpu-debian12"]))
    for job in ("sign", "verify"):
        assert re.search(rf"# @Description .*skipped when RAPIDSHIP_SIGNING_KEY is not set - the images stay UNSIGNED"
                         rf".*\n{job}:cpu-debian12:", text), job


# ---- who runs where: protected secrets only on protected runners ----

def _as_gitlab_reads(matrix, profile, ids=None) -> dict:
    """The file `invoke ci.generate` writes, parsed back: what GitLab reads."""
    return yaml.safe_load(ci.to_yaml(ci.pipeline(matrix, profile, ids), ci.descriptions(matrix, profile, ids)))


@pytest.mark.parametrize("builder", [ci.Builder.buildctl, ci.Builder.kaniko])
def test_every_job_with_a_protected_secret_runs_only_on_a_protected_runner(validator, matrix, builder):
    from rapidship.ci import runners

    protected = _as_gitlab_reads(matrix, ci.production(builder, "protected"))
    unprotected = _as_gitlab_reads(matrix, ci.production(builder, "unprotected"))
    assert _schema_errors(validator, protected) == [] and _schema_errors(validator, unprotected) == []
    with_secret = {n for n, j in _jobs(protected).items() if runners.protected_secrets(j)}
    # found by what each job receives, not listed by hand: every stage that uses the ci robot, the key,
    # the promote robot or the GitLab token
    stages = {n.split(":")[0] for n in with_secret}
    assert stages == {"build", "gates", "scan", "push", "smoke", "harbor-gate", "sign", "verify", "promote", "export",
                      ci.RUNNERS_JOB}, stages
    for name in with_secret:
        job = protected[name]
        assert set(job["tags"]) & set(ci.PROTECTED_RUNNER_TAGS), name
        assert runners.only_on_protected_refs(job), name
    assert runners.pipeline_problems(protected) == []
    # merge requests and every other ref: the other file, the plain pool; no protected tag, no protected secret
    for name, job in _jobs(unprotected).items():
        assert not set(job.get("tags", [])) & set(ci.PROTECTED_RUNNER_TAGS), name
        assert runners.protected_secrets(job) == [], name
        assert not runners.only_on_protected_refs(job) and job["rules"][0] == {"if": ci.PROTECTED_REF, "when": "never"}
    assert runners.pipeline_problems(unprotected) == []


def test_the_runner_check_fails_naming_the_job(matrix):
    """The gate can fail: a secret-bearing job without the tag, a merge-request job with it, an
    environment only known at run time."""
    from rapidship.ci import runners

    protected = _as_gitlab_reads(matrix, ci.production(), ["cpu-debian12"])
    protected["push:cpu-debian12"]["tags"] = ["amd64", "docker"]
    found = runners.pipeline_problems(protected)
    assert len(found) == 1 and found[0].startswith("job push:cpu-debian12 receives a protected secret "
                                                   "(environment ci-staging, variable HARBOR_CI_ROBOT_NAME")
    mr = _as_gitlab_reads(matrix, ci.production(refs="unprotected"), ["cpu-debian12"])
    mr["build:cpu-debian12:amd64"]["tags"].append(ci.PROTECTED_RUNNER_TAG)
    found = runners.pipeline_problems(mr)
    assert len(found) == 1 and "job build:cpu-debian12:amd64 carries the runner tag protected but may run on an " \
                               "unprotected ref" in found[0]
    dynamic = {"build": {"stage": "build", "tags": ["amd64"], "environment": {"name": "$WHICHEVER"}, "script": ["x"]}}
    assert "job build receives a protected secret (environment $WHICHEVER)" in runners.pipeline_problems(dynamic)[0]


def test_pipeline_variables_never_reach_the_child(validator):
    """Whoever may run a pipeline with variables on a protected ref must not redirect HARBOR_HOST (and
    the ci robot's credentials) for the child: no trigger forwards them, read as GitLab reads the
    keyword (absent means the schema's default)."""
    schema = json.loads(SCHEMA.read_text())
    text = json.dumps(schema)
    at = text.index('"pipeline_variables": {')
    default = json.loads(text[at + len('"pipeline_variables": '):].split("}", 1)[0] + "}")["default"]

    def forwards(job: dict) -> bool:
        return bool((job["trigger"].get("forward") or {}).get("pipeline_variables", default))

    merged: dict = {}
    for path in [ROOT / ".gitlab-ci.yml", *sorted((ROOT / "ci").glob("*.yml"))]:
        merged.update(yaml.safe_load(path.read_text()))
    triggers = {n: j for n, j in _jobs(merged).items() if isinstance(j, dict) and "trigger" in j}
    assert triggers and not [n for n, j in triggers.items() if forwards(j)]
    assert _schema_errors(validator, merged) == []
    on = {**triggers["images"]["trigger"], "forward": {"pipeline_variables": True}}
    forwarding = {**triggers["images"], "trigger": on}
    assert forwards(forwarding) and _schema_errors(validator, {**merged, "images": forwarding}) == []
    assert default is False and not forwards({"trigger": {"include": "x.yml"}})
