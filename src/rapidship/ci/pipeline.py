"""Matrix -> GitLab child pipeline.

Pure core: `pipeline(matrix, profile)` returns the pipeline as a dict; every job script is a list
of `invoke` calls, so the YAML carries structure (stages, needs, rules, tags, artifacts) and no
logic. Thin edge: `write_pipeline` dumps it as YAML with gitlab-ci-local `@Description` comments.

One set of job definitions serves two profiles:
- `production`: GitLab runners tagged by arch; builds in rootless BuildKit (buildctl-daemonless)
  or kaniko, images handed between runners through a per-pipeline candidate tag in the Harbor
  staging project, the BuildKit cache and the trivy DB mirrored in Harbor.
- `local`: one machine with a shell executor and its own dockerd (gitlab-ci-local), a loopback
  registry in place of Harbor, bases made with mmdebstrap (`invoke base`).

DAG: every job `needs:` only its own variant's jobs, so one variant failing holds no other.
The one exception is `report`, last: it waits for every stage (`when: always`, so also after
failures) and takes every job's artifacts, to show the whole release on one page.

Privileges (docs/ci.md, "Who reaches what"): no secret is a pipeline variable. Each secret is a
project variable scoped to a GitLab environment, and only the jobs that use it declare that
environment. The production profile is generated twice, once per kind of ref, because GitLab
picks a job's runner from tags fixed before `rules:` run (tags cannot follow the ref):
- `refs="protected"`: every job runs only on protected refs and on protected runners, tagged
  `protected` (release jobs: `release`); the `ci` robot reaches the jobs that build, pull or push
  (`ci-staging`; the jobs that build or gate, with the protected package mirrors: `ci-build`), the
  signing key `sign:V` alone (`ci-signing`), the promote robot `promote:V` alone (`release`);
  `protected-runners` asks GitLab first that protected runners carry those tags;
- `refs="unprotected"` (merge requests, other branches and tags): the same jobs with the `mr`
  robot (`mr-staging`; with the MR builds' own mirrors: `mr-build`) on the plain arch tags, never a
  protected tag, and no sign, verify, promote or export.
The parent pipeline's trigger jobs pick the file by `$CI_COMMIT_REF_PROTECTED`. `verify:V` checks
what was signed before `promote:V` and `export:V`. Job scripts never name a secret: the tasks read
them from the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import yaml

from rapidship.errors import ConfigError
from rapidship.config.matrix import Arch, Matrix, Variant
from rapidship.records import Workspace

STAGES = ["prepare", "build", "verify", "publish", "smoke", "release", "report"]

# Job artifacts are the workspace's own record paths (relative: GitLab artifact paths).
WS = Workspace("build")
SCAN_FILES = {"cyclonedx": "sbom.cdx.json", "container_scanning": "gl-container-scanning-report.json"}
EXPORT_DIR = "export/{variant}"
# Offline stand-in for the Harbor trivy DB mirror in the local profile (made-up advisories).
LOCAL_ADVISORIES = "ci/local-advisories.yaml"
LOCAL_TRIVY_CACHE = "build/trivy-cache"

# GitLab retries only what the runner broke; a failing build or gate is never retried.
RETRY = {"max": 2, "when": ["runner_system_failure"]}
# Set in the child pipeline's variables where no runner tagged `gpu` exists: the smoke is skipped.
NO_GPU = "none"

# Signing (docs/ci.md): a GitLab *file* variable (the path of cosign.key, or a pkcs11:/KMS URI) and a
# masked one, both protected and scoped to the environment SIGNING_ENVIRONMENT, so only `sign:*`
# jobs get them. The tasks read them from the environment (rapidship.sign.keys): they are never
# written into the YAML, a job variable or a command line. The public key is a file variable too.
SIGNING_KEY = "RAPIDSHIP_SIGNING_KEY"
SIGNING_PASSWORD = "RAPIDSHIP_SIGNING_PASSWORD"
SIGNING_PUBLIC_KEY = "RAPIDSHIP_SIGNING_PUBLIC_KEY"
POLICY = "policy/trivy.yaml"
# Protected variables reach only pipelines of protected branches and tags: elsewhere there is no
# key, so sign and verify are left out there instead of failing every merge request.
PROTECTED_REF = '$CI_COMMIT_REF_PROTECTED == "true"'
UNPROTECTED_REF = '$CI_COMMIT_REF_PROTECTED != "true"'
PROTECTED_TAG = f'$CI_COMMIT_TAG && {PROTECTED_REF}'

# The environments secrets are scoped to (docs/ci.md): a job gets a secret only by declaring one.
CI_ENVIRONMENT = "ci-staging"         # the `ci` robot (protected, scope ci-*): protected-ref jobs that use a registry
MR_ENVIRONMENT = "mr-staging"         # the `mr` robot (scope mr-*): the same jobs on every other ref
CI_BUILD_ENVIRONMENT = "ci-build"     # the `ci` robot and the protected builds' mirrors (scope ci-build): build, gates
MR_BUILD_ENVIRONMENT = "mr-build"     # the `mr` robot and the MR builds' own mirrors (scope mr-build): the same
SIGNING_ENVIRONMENT = "ci-signing"    # the signing key (protected, scope ci-signing) and the `ci` robot
RELEASE_ENVIRONMENT = "release"       # the promote robot (protected, scope release): promote:V alone
RUNNERS_ENVIRONMENT = "runners"       # the read_api token protected-runners asks GitLab with (scope runners)
# the environments holding protected secrets: a job declaring one must run on a protected runner
PROTECTED_ENVIRONMENTS = (CI_ENVIRONMENT, CI_BUILD_ENVIRONMENT, SIGNING_ENVIRONMENT, RELEASE_ENVIRONMENT,
                          RUNNERS_ENVIRONMENT)
CI_ROBOT = {"RAPIDSHIP_REGISTRY_USER": "$HARBOR_CI_ROBOT_NAME", "RAPIDSHIP_REGISTRY_PASSWORD": "$HARBOR_CI_ROBOT_SECRET"}
MR_ROBOT = {"RAPIDSHIP_REGISTRY_USER": "$HARBOR_MR_ROBOT_NAME", "RAPIDSHIP_REGISTRY_PASSWORD": "$HARBOR_MR_ROBOT_SECRET"}
PROMOTE_ROBOT = {"RAPIDSHIP_REGISTRY_USER": "$HARBOR_PROMOTE_ROBOT_NAME",
                 "RAPIDSHIP_REGISTRY_PASSWORD": "$HARBOR_PROMOTE_ROBOT_SECRET"}
# The package mirrors a build reads (BuildKit secrets pip-index and conda-channels; the gates look for
# them in the image): like the robots, one credential per kind of ref, scoped to the environment only
# the jobs that build or gate declare (ci-build / mr-build) and mapped there to the names the tasks
# read. An MR build gets the MR's own mirrors, or none (public indexes), never a protected build's.
CI_MIRRORS = {"RAPIDSHIP_PIP_INDEX_URL": "$RAPIDSHIP_CI_PIP_INDEX_URL",
              "RAPIDSHIP_CONDA_CHANNELS": "$RAPIDSHIP_CI_CONDA_CHANNELS"}
MR_MIRRORS = {"RAPIDSHIP_PIP_INDEX_URL": "$RAPIDSHIP_MR_PIP_INDEX_URL",
              "RAPIDSHIP_CONDA_CHANNELS": "$RAPIDSHIP_MR_CONDA_CHANNELS"}
# Runner tags that only protected runners (they take jobs of protected refs only) on hosts that no
# merge-request job reaches may carry (docs/ci.md, "Runner topology"): `protected` on every job of
# the protected-ref pipeline, `release` instead on the release jobs (hosts of their own).
PROTECTED_RUNNER_TAG = "protected"
RELEASE_TAG = "release"
PROTECTED_RUNNER_TAGS = (PROTECTED_RUNNER_TAG, RELEASE_TAG)
RUNNERS_JOB = "protected-runners"
# The two production files, one per kind of ref (ci/project.yml writes them, ci/images.yml runs one)
CHILD_PIPELINES = {"protected": "build/ci/child-protected.yml", "unprotected": "build/ci/child-unprotected.yml"}
REFS = tuple(CHILD_PIPELINES)
# the parent's job that writes the protected file: protected-runners reads that artifact
GENERATE_JOB = "generate"


class Builder(str, Enum):
    buildctl = "buildctl"  # rootless BuildKit, buildctl-daemonless.sh: the production default
    kaniko = "kaniko"      # osscontainertools/kaniko: only for builds that need no secrets
    docker = "docker"      # the runner's own dockerd (BuildKit built in): the local profile


@dataclass(frozen=True)
class Profile:
    name: str
    builder: Builder
    shell: bool                  # shell executor (no `image:`), else docker executor images
    registry: str                # where `invoke push` puts per-arch tags and the manifest list
    handoff: bool                # images move between jobs through candidate tags in `registry`
    variables: dict[str, str] = field(default_factory=dict)
    bootstrap_bases: bool = False  # make Debian-family bases with mmdebstrap (nothing to pull)
    arches: tuple[Arch, ...] | None = None  # None: every arch of each variant
    trivy_db_repository: str | None = None  # None: a DB planted from LOCAL_ADVISORIES (no network)
    robots: bool = False  # registry robots reach jobs through scoped environments (GitLab); else from the shell
    harbor_gate: bool = False  # Harbor scans what was pushed and the same policy judges it before promote
    # `rules: if:` under which sign and verify run; elsewhere they are left out (listed, with why)
    sign_if: str = PROTECTED_REF
    sign_skipped: str = "skipped on unprotected refs, which get no key (protected variables)"
    release_if: str = PROTECTED_TAG  # promote and export: release tags only, which must be protected
    refs: str | None = None  # production: "protected" or "unprotected" (one file per kind); local: None

    def arch_tags(self, arch: str, *extra: str) -> dict:
        """`tags:` routes a job to a runner; a single shell executor takes every job untagged. On
        protected refs every job goes to the protected pool (release jobs to the release hosts)."""
        if self.shell:
            return {}
        pool = (PROTECTED_RUNNER_TAG,) if self.refs == "protected" and RELEASE_TAG not in extra else ()
        return {"tags": [arch, *extra, *pool]}

    def release_tags(self, arch: str, *extra: str) -> dict:
        return self.arch_tags(arch, *extra, RELEASE_TAG)

    def arches_of(self, v: Variant) -> tuple[Arch, ...]:
        return tuple(a for a in v.arches if self.arches is None or a in self.arches)


def _narrowed(v: Variant, p: Profile) -> str:
    """push's --arch flags when the profile builds only some of the variant's arches (push
    otherwise wants every arch of the variant for its manifest list)."""
    arches = p.arches_of(v)
    return "" if arches == tuple(v.arches) else "".join(f" --arch {a.value}" for a in arches)


def production(builder: Builder = Builder.buildctl, refs: str = "protected") -> Profile:
    if builder is Builder.docker:
        raise ConfigError("--builder", "the production profile builds without a docker daemon",
                          "use --builder buildctl (default) or --builder kaniko")
    if refs not in REFS:
        raise ConfigError("--refs", f"{refs!r} is not protected or unprotected",
                          "pass --refs protected (protected branches and tags) or --refs unprotected (every other ref)")
    harbor = "$HARBOR_HOST"
    return Profile(
        name="production", builder=builder, shell=False, handoff=True, refs=refs,
        trivy_db_repository="$TRIVY_DB_REPOSITORY", harbor_gate=True, robots=True,
        registry=f"{harbor}/$HARBOR_STAGING_PROJECT",
        # no secret among them: robots reach jobs only through their environments (module docstring)
        variables={
            "RAPIDSHIP_REGISTRY": f"{harbor}/$HARBOR_STAGING_PROJECT",
            "RAPIDSHIP_CANDIDATE_SUFFIX": "ci$CI_PIPELINE_IID",
            "RAPIDSHIP_RUN_ID": "ci$CI_PIPELINE_ID",  # the engine's image names of this pipeline (shared engines)
            "RAPIDSHIP_CACHE_REPO": f"{harbor}/$HARBOR_CACHE_PROJECT",
            "RAPIDSHIP_MR_CACHE_REPO": f"{harbor}/$HARBOR_MR_CACHE_PROJECT",
            "RAPIDSHIP_BUILDER": builder.value,
            # trivy reads its vulnerability DB from the Harbor mirror, never from the internet.
            "TRIVY_DB_REPOSITORY": f"{harbor}/$HARBOR_MIRROR_PROJECT/aquasecurity/trivy-db",
            "TRIVY_JAVA_DB_REPOSITORY": f"{harbor}/$HARBOR_MIRROR_PROJECT/aquasecurity/trivy-java-db",
            "BUILDKITD_FLAGS": "--oci-worker-no-process-sandbox",
            "FF_KANIKO_RUN_MOUNT_CACHE": "true",
        })


def local(registry: str = "127.0.0.1:5000/staging", arches: tuple[Arch, ...] | None = None) -> Profile:
    from rapidship.publish.oci import redact, split_repository

    split_repository(registry)  # credentials, tokens, bad ports and missing projects are refused first
    if not registry.startswith(("127.0.0.1:", "localhost:")):
        raise ConfigError("--registry", f"{redact(registry)} is not a loopback registry",
                          "the local profile pushes only to 127.0.0.1:PORT/PROJECT")
    return Profile(name="local", builder=Builder.docker, shell=True, handoff=False, registry=registry,
                   bootstrap_bases=True, arches=arches,
                   # gitlab-ci-local has no protected refs: sign when a key is given, else say so
                   sign_if=f"${SIGNING_KEY}", release_if="$CI_COMMIT_TAG",
                   sign_skipped=f"skipped when {SIGNING_KEY} is not set - the images stay UNSIGNED "
                                "and promote refuses them",
                   variables={"RAPIDSHIP_REGISTRY": registry, "RAPIDSHIP_GPU_RUNNERS": NO_GPU,
                              "RAPIDSHIP_RUN_ID": "ci$CI_PIPELINE_ID"})


@dataclass(frozen=True)
class Job:
    name: str
    body: dict
    description: str


def profile_for(name: str, builder: str | None = None, registry: str | None = None,
                arches: tuple[Arch, ...] | None = None, refs: str | None = None) -> Profile:
    """The --profile / --builder / --registry / --arch / --refs flags -> a Profile; a flag the profile
    does not use is an error, never silently ignored."""
    if name == "production":
        if arches:
            raise ConfigError("--arch", "the production profile builds every arch of each variant on its runners",
                              "drop --arch (narrow variants.yaml instead), or use --profile local")
        if registry is not None:
            raise ConfigError("--registry", "the production profile pushes to the Harbor project of harbor/ "
                              "(CI variable RAPIDSHIP_REGISTRY), not to --registry", "drop --registry, or use --profile local")
        try:
            chosen = Builder(builder or Builder.buildctl.value)
        except ValueError:
            raise ConfigError("--builder", f"{builder!r} is not buildctl or kaniko", "pass --builder buildctl") from None
        return production(chosen, refs or "protected")
    if name == "local":
        if refs is not None:
            raise ConfigError("--refs", "gitlab-ci-local has no protected refs: the local profile is one file",
                              "drop --refs, or use --profile production")
        if builder is not None:
            raise ConfigError("--builder", "the local profile builds with this machine's Docker engine",
                              "drop --builder, or use --profile production")
        return local(registry or "127.0.0.1:5000/staging", arches)
    raise ConfigError("--profile", f"{name!r} is not production or local", "pass --profile production")


def pipeline(matrix: Matrix, profile: Profile, variant_ids: list[str] | None = None) -> dict:
    """Pure: the child pipeline for the selected variants (default: every variant)."""
    doc: dict = {"stages": list(STAGES), "variables": dict(profile.variables), "default": _default(profile)}
    for job in jobs(matrix, profile, variant_ids):
        doc[job.name] = job.body
    return doc


def left_out(matrix: Matrix, profile: Profile) -> dict[str, str]:
    """The variants the profile cannot build, each with why: with no --variant they are left out."""
    return {v.id: f"needs its {v.distro} base from a registry; the local profile only makes Debian-family bases"
            for v in matrix.select(None) if profile.bootstrap_bases and v.family != "deb"}


def _gated(body: dict, refs: str | None) -> dict:
    """The job left out on the other kind of ref, first of its rules: a file of one kind never runs
    a job on the other (a job-level `when:` moves into the last rule: GitLab refuses both)."""
    if refs is None:
        return body
    gate = {"if": UNPROTECTED_REF if refs == "protected" else PROTECTED_REF, "when": "never"}
    body = dict(body)
    rules = body.pop("rules", None) or [{"when": body.pop("when", "on_success")}]
    return {**body, "rules": [gate, *rules]}


def jobs(matrix: Matrix, profile: Profile, variant_ids: list[str] | None = None) -> list[Job]:
    found = _jobs(matrix, profile, variant_ids)
    if profile.refs == "unprotected":  # what only protected refs may run is not in their file at all
        found = [j for j in found if j.name.split(":")[0] not in PROTECTED_ONLY]
    return [Job(j.name, _gated(j.body, profile.refs), j.description) for j in found]


# jobs that need a protected secret on every ref they run on: absent from the unprotected file
PROTECTED_ONLY = (RUNNERS_JOB, "sign", "verify", "promote", "export")


def _jobs(matrix: Matrix, profile: Profile, variant_ids: list[str] | None = None) -> list[Job]:
    out: list[Job] = [_runners_job(profile)] if profile.robots and profile.refs == "protected" else []
    cannot = left_out(matrix, profile)
    for v in matrix.select(variant_ids):
        if v.id in cannot:
            if variant_ids is None:
                continue
            raise ConfigError("--variant", f"{v.id} {cannot[v.id]}", "select Debian-family variants for --profile local")
        if not profile.arches_of(v):
            raise ConfigError("--variant", f"{v.id} is built for none of this profile's arches",
                              f"select a variant built for {', '.join(a.value for a in profile.arches or ())}")
        out += _variant_jobs(v, profile)
    out.append(_report_job(profile))
    return out


REPORT_JOB = "report"
REPORT_DIR = "build/report"


def _report_job(p: Profile) -> Job:
    """The release report, after everything else. No `needs:`: a job without it waits for every
    earlier stage and downloads the artifacts of all their jobs (the records it reads); `when:
    always` runs it after failures too, which is when the page matters most. GitLab links the
    folder from the merge request (`expose_as`; such paths must be plain, a folder ending in /)."""
    return Job(REPORT_JOB, {
        "stage": "report",
        **p.arch_tags("amd64"),
        "when": "always",
        "script": [f"invoke report --out {REPORT_DIR}"],
        "artifacts": {"when": "always", "expose_as": "release report", "paths": [f"{REPORT_DIR}/"],
                      "expire_in": "1 year"},
    }, "release report of every variant and arch (index.html, PNG charts, report.json), also after failures")


def _default(profile: Profile) -> dict:
    default: dict = {"interruptible": True, "retry": dict(RETRY)}
    if not profile.shell:
        default["image"] = "$RAPIDSHIP_CI_IMAGE"
    return default


def _name(stage: str, v: Variant, arch: Arch | None = None) -> str:
    return f"{stage}:{v.id}" + (f":{arch.value}" if arch else "")


def _signed_root(vid: str) -> Path:
    """build/<variant>/signed: the folder holding one signed_dir per signed digest."""
    return WS.signed_dir(vid, "sha256:0").parent


def _pull(v: Variant, arch: Arch, profile: Profile) -> list[str]:
    """Where builds ran on another runner, fetch the candidate into this job's engine first."""
    return [f"invoke ci.pull --variant {v.id} --arch {arch.value}"] if profile.handoff else []


def _names(robot: dict[str, str], user: str, password: str) -> dict[str, str]:
    return {user: robot["RAPIDSHIP_REGISTRY_USER"], password: robot["RAPIDSHIP_REGISTRY_PASSWORD"]}


def _any_ref(p: Profile, never: tuple[str, ...] = (), names: tuple[str, str] | None = None,
             mirrors: bool = False) -> dict:
    """rules + environment of a job that runs on every ref and uses a registry: the `ci` robot in the
    protected-ref file, the `mr` robot in the other, each from the environment its variables are
    scoped to; with `mirrors`, that kind of ref's package mirrors too. `never`: conditions under
    which the job is left out (checked first)."""
    rules: list[dict] = [{"if": cond, "when": "never"} for cond in never]
    if not p.robots:
        return {"rules": rules + [{"when": "on_success"}]} if rules else {}
    protected = p.refs == "protected"
    robot, environment = (CI_ROBOT, CI_ENVIRONMENT) if protected else (MR_ROBOT, MR_ENVIRONMENT)
    variables = robot if names is None else _names(robot, *names)
    if mirrors:   # an environment of its own (it matches its robot's scope too): no other job gets them
        variables = {**variables, **(CI_MIRRORS if protected else MR_MIRRORS)}
        environment = CI_BUILD_ENVIRONMENT if protected else MR_BUILD_ENVIRONMENT
    rules.append({"variables": variables})
    return {"rules": rules, "environment": {"name": environment, "action": "access"}}


def _only(p: Profile, condition: str, environment: str | None, robot: dict[str, str] | None,
          action: str = "access") -> dict:
    """rules + environment of a job that runs only where `condition` holds (protected refs, release
    tags), with `robot` from `environment` when the profile hands robots out."""
    variables = robot if p.robots and robot else {}
    rules = [{"if": condition, **({"variables": dict(variables)} if variables else {"when": "on_success"})},
             {"when": "never"}]
    if not p.robots or environment is None:  # one shell executor: secrets come from its own shell
        return {"rules": rules}
    return {"rules": rules, "environment": {"name": environment, **({"action": action} if action != "start" else {})}}


def _runners_job(p: Profile) -> Job:
    """Before any release job: GitLab holds a job with no runner for its tags as pending; this one
    reads the very file GitLab runs (the parent's artifact) and fails at once, naming the job or the
    tag, when a job with a protected secret lacks a protected tag, or no protected runner carries
    a job's tags, or an unprotected one carries a protected tag."""
    return Job(RUNNERS_JOB, {
        "stage": "prepare",
        **p.arch_tags("amd64"),
        "rules": [{"if": PROTECTED_REF, "when": "on_success"}, {"when": "never"}],
        "environment": {"name": RUNNERS_ENVIRONMENT, "action": "access"},  # its read_api token alone
        # the trigger job passes PARENT_PIPELINE_ID: the artifact is the file this pipeline runs
        "needs": [{"pipeline": "$PARENT_PIPELINE_ID", "job": GENERATE_JOB}],
        "script": [f"invoke ci.runners --pipeline {CHILD_PIPELINES['protected']}"],
    }, f"every job with a protected secret carries the runner tag {PROTECTED_RUNNER_TAG} or {RELEASE_TAG}, and "
       "protected online runners, and only protected ones, carry each job's tags (protected refs)")


def _variant_jobs(v: Variant, p: Profile) -> list[Job]:
    vid = v.id
    out_dir = f"{WS.variant_dir(vid)}/"
    render = _name("render", v)
    found = [Job(render, {
        "stage": "prepare",
        **p.arch_tags(p.arches_of(v)[0].value),
        "script": [f"invoke render --variant {vid}", f"invoke lint --variant {vid}"],
        "artifacts": {"paths": [out_dir], "expire_in": "1 week"},
    }, f"render and hadolint {vid}")]
    build_jobs, gates_jobs, scan_jobs, smoke_jobs = [], [], [], []
    for arch in p.arches_of(v):
        a = arch.value
        build = _name("build", v, arch)
        found.append(Job(build, _build_body(v, arch, p), f"build {v.id} {arch.value} with {p.builder.value}"))
        gates = _name("gates", v, arch)
        found.append(Job(gates, {
            "stage": "verify",
            **p.arch_tags(a, "docker"),
            **_any_ref(p, mirrors=True),   # the gates look for the mirror credentials in the image
            "needs": [render, build],
            "script": [*_pull(v, arch, p), f"invoke gates --variant {vid} --arch {a}"],
            # sign reads the gate record, the content manifest and the build record of what was gated
            "artifacts": {"when": "always", "paths": [str(WS.gates(vid, a)), str(WS.content(vid, a)),
                                                      *([str(WS.build(vid, a))] if p.handoff else [])],
                          "expire_in": "1 week"},
        }, f"image gates on {vid} {a}"))
        scan = _name("scan", v, arch)
        scan_dir = str(WS.scan_dir(vid, a))
        files = {k: f"{scan_dir}/{name}" for k, name in SCAN_FILES.items()}
        found.append(Job(scan, {
            "stage": "verify",
            **p.arch_tags(a, "docker"),
            **_any_ref(p),
            "needs": [render, build],
            "script": [*_pull(v, arch, p), *_scan(vid, a, scan_dir, p)],
            "artifacts": {"when": "always", "paths": [f"{scan_dir}/"], "expire_in": "30 days",
                          "reports": {"container_scanning": [files["container_scanning"]],
                                      "cyclonedx": [files["cyclonedx"]]}},
        }, f"trivy scan, SBOM and vulnerability gate on {vid} {a}"))
        build_jobs.append(build)
        gates_jobs.append(gates)
        scan_jobs.append(scan)
    push = _name("push", v)
    found.append(Job(push, {
        "stage": "publish",
        **p.arch_tags("amd64", "docker"),
        **_any_ref(p),
        # needs every arch's gates and scan: the manifest list is merged only when all arches passed.
        "needs": [render, *build_jobs, *gates_jobs, *scan_jobs],
        # --no-sign: signing is the sign job's, the one job that gets the key
        "script": [*(line for arch in p.arches_of(v) for line in _pull(v, arch, p)),
                   f"invoke push --variant {vid} --registry $RAPIDSHIP_REGISTRY --no-sign{_narrowed(v, p)}"],
        "artifacts": {"paths": [str(WS.push(vid))], "expire_in": "30 days"},  # promote reads it
        "resource_group": f"push-{vid}",
    }, f"push {vid} per-arch tags, then the manifest list, to the staging registry"))
    for arch in p.arches_of(v):
        a = arch.value
        smoke = _name("smoke", v, arch)
        gpus = " --mode gpu --gpus all" if v.cuda else ""
        found.append(Job(smoke, {
            "stage": "smoke",
            "tags": ["gpu"] if p.shell else ["gpu", *p.arch_tags(a)["tags"]],
            "needs": [render, _name("build", v, arch), push],
            **_any_ref(p, never=(f'$RAPIDSHIP_GPU_RUNNERS == "{NO_GPU}"',)),
            "script": [*_pull(v, arch, p), f"invoke smoke --variant {vid} --arch {a}{gpus}"],
            "artifacts": {"when": "always", "paths": [f"{WS.smoke_dir()}/"], "expire_in": "30 days"},
        }, f"spill smoke of {vid} {a}, hardened profile; skipped when RAPIDSHIP_GPU_RUNNERS={NO_GPU} "
           "(no runner tagged gpu with the NVIDIA container toolkit)"))
        smoke_jobs.append(smoke)
    sign, verify = _name("sign", v), _name("verify", v)
    runners = [{"job": RUNNERS_JOB, "artifacts": False}] if p.robots else []
    found.append(Job(sign, {
        "stage": "publish",
        **p.release_tags("amd64"),
        # the records sign checks against the registry: render, build, gates, scan, push
        "needs": [render, *build_jobs, *gates_jobs, *scan_jobs, push, *runners],
        # the key is scoped to this environment (and the ci robot, which attaches the signatures);
        # `prepare` records no deployment
        **_only(p, p.sign_if, SIGNING_ENVIRONMENT, CI_ROBOT, action="prepare"),
        "script": [f"invoke sign --variant {vid}"],
        "artifacts": {"paths": [str(WS.sign(vid)), f"{_signed_root(vid)}/"], "expire_in": "30 days"},
        "resource_group": f"sign-{vid}",
    }, f"sign {vid} (index, every arch, SBOM and provenance attestations) with {SIGNING_KEY} (file variable) "
       f"and {SIGNING_PASSWORD} (masked), environment {SIGNING_ENVIRONMENT}; {p.sign_skipped}"))
    found.append(Job(verify, {
        "stage": "publish",
        **p.arch_tags("amd64"),
        "needs": [push, sign],
        **_only(p, p.sign_if, CI_ENVIRONMENT, CI_ROBOT),
        # the digest push recorded, not whatever the tag points at by now
        "script": [f'invoke verify --variant {vid} --key "${SIGNING_PUBLIC_KEY}" --policy {POLICY}'],
    }, f"verify the signature and attestations of the pushed {vid} with {SIGNING_PUBLIC_KEY}; {p.sign_skipped}"))
    # optional: where sign and verify are left out, promote still checks the signatures itself and refuses
    signed_needs = [{"job": verify, "optional": True}]
    # promote, Harbor's gate and export check that the gate, scan and build records name the
    # pushed image (records.gated_problems): they need those jobs' artifacts
    records = [*build_jobs, *gates_jobs, *scan_jobs]
    release_needs: list = [push, *records]
    if p.harbor_gate:
        harbor_gate = _name("harbor-gate", v)
        release_needs.append(harbor_gate)
        found.append(Job(harbor_gate, {
            "stage": "publish",
            **p.arch_tags("amd64"),
            "needs": [push, *records],
            **_any_ref(p, names=("RAPIDSHIP_HARBOR_USER", "RAPIDSHIP_HARBOR_PASSWORD")),
            "script": [f"invoke harbor.scan --variant {vid}"],
            "artifacts": {"when": "always", "paths": [out_dir], "expire_in": "30 days"},
        }, f"Harbor scans the pushed {vid} and the trivy policy judges its report"))
    promote = _name("promote", v)
    found.append(Job(promote, {
        "stage": "release",
        **p.release_tags("amd64", "docker"),
        "needs": [*release_needs, *signed_needs, *({"job": s, "optional": True} for s in smoke_jobs), *runners],
        # the promote robot (it may write the release project) is scoped to `release`: this job alone
        **_only(p, p.release_if, RELEASE_ENVIRONMENT, PROMOTE_ROBOT, action="start"),
        "interruptible": False,  # a release half done is worse than one not started
        "script": [f'invoke promote --variant {vid} --key "${SIGNING_PUBLIC_KEY}"'],
        "artifacts": {"paths": [str(WS.promote(vid))], "expire_in": "1 year"},
        "resource_group": f"release-{vid}",
    }, f"promote {vid} from staging to the release project (tags only)"))
    export_dir = EXPORT_DIR.format(variant=vid)
    found.append(Job(_name("export", v), {
        "stage": "release",
        **p.release_tags("amd64", "docker"),
        # sign's artifacts: the signature objects travel on the disc
        "needs": [render, *records, {"job": sign, "optional": True}, *signed_needs, promote, *runners],
        **_only(p, p.release_if, CI_ENVIRONMENT, CI_ROBOT),
        "interruptible": False,
        "script": [*(line for arch in p.arches_of(v) for line in _pull(v, arch, p)),
                   f"invoke export --variant {vid} --media dvd --out {export_dir}",
                   # every volume written, its signatures checked against the release public key
                   f'invoke export-verify --from {export_dir} --key "${SIGNING_PUBLIC_KEY}"'],
        "artifacts": {"paths": [f"{export_dir}/"], "expire_in": "30 days"},
    }, f"export {vid} to DVD-sized volumes and verify them (tags only)"))
    return found


def _scan(vid: str, a: str, scan_dir: str, p: Profile) -> list[str]:
    """trivy with its DB from the Harbor mirror; locally, from a DB written from planted advisories."""
    scan = f"invoke scan --variant {vid} --arch {a} --out {scan_dir}"
    if p.trivy_db_repository:
        return [f"{scan} --db-repository {p.trivy_db_repository}"]
    return [f"invoke trivy-db --advisories {LOCAL_ADVISORIES} --cache-dir {LOCAL_TRIVY_CACHE}",
            f"{scan} --cache-dir {LOCAL_TRIVY_CACHE} --skip-db-update --offline-scan"]


def _build_body(v: Variant, arch: Arch, p: Profile) -> dict:
    a = arch.value
    if p.builder is Builder.docker:
        script = ([f"invoke base --os {v.os} --arch {a}"] if p.bootstrap_bases else [])
        script.append(f"invoke build --variant {v.id} --arch {a}")
        body: dict = {**p.arch_tags(a, "docker")}
    else:
        # rootless BuildKit or kaniko: no daemon; the image goes to a candidate tag in staging
        script = [f"invoke ci.build --variant {v.id} --arch {a}"]
        body = {**p.arch_tags(a), "image": {
            Builder.buildctl: {"name": "$RAPIDSHIP_BUILDKIT_IMAGE", "entrypoint": [""]},
            Builder.kaniko: {"name": "$RAPIDSHIP_KANIKO_IMAGE", "entrypoint": [""]},
        }[p.builder]}
    record = str(WS.build(v.id, a) if p.builder is Builder.docker else WS.staged(v.id, a))
    return {"stage": "build", **body, **_any_ref(p, mirrors=True), "needs": [_name("render", v)], "script": script,
            "artifacts": {"when": "always", "paths": [record, str(WS.build_log(v.id, a))], "expire_in": "1 week"}}


def descriptions(matrix: Matrix, profile: Profile, variant_ids: list[str] | None = None) -> dict[str, str]:
    return {j.name: j.description for j in jobs(matrix, profile, variant_ids)}


def to_yaml(doc: dict, described: dict[str, str] | None = None) -> str:
    """YAML text; each job preceded by a `# @Description` comment (gitlab-ci-local lists it)."""
    described = described or {}
    header = ("# Generated by `invoke ci.generate` from variants.yaml: do not edit by hand.\n"
              "# Every script line is an invoke task; see docs/ci.md.\n")
    parts = [header]
    for key, value in doc.items():
        if key in described:
            # gitlab-ci-local takes the first later line holding "word:" as the job: no colons here
            parts.append(f"\n# @Description {described[key].replace(':', ' ')}\n")
        parts.append(yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False, width=120))
    return "".join(parts)


def write_pipeline(matrix: Matrix, profile: Profile, out: Path, variant_ids: list[str] | None = None) -> Path:
    doc = pipeline(matrix, profile, variant_ids)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(to_yaml(doc, descriptions(matrix, profile, variant_ids)))
    return out
