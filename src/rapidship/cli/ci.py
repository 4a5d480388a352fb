"""`invoke ci.*`: the GitLab child pipeline and the steps only CI runners need."""

from __future__ import annotations

from pathlib import Path

from invoke import Collection

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import VARIANTS_HELP, arch_flag
from rapidship.config.matrix import load_matrix
from rapidship.errors import exits_cleanly
from rapidship.records import Workspace


@task(name="generate", iterable=["variant", "arch"],
      help={"out": "where to write the child pipeline (default build/ci/child-protected.yml)",
            "profile": "production (GitLab runners, Harbor) or local (shell executor, loopback registry)",
            "refs": "production profile: protected (protected branches and tags, protected runners; default) or "
                    "unprotected (merge requests and every other ref)",
            "builder": "production profile: buildctl (rootless BuildKit, default) or kaniko",
            "registry": "local profile: loopback registry and project (default 127.0.0.1:5000/staging)",
            "arch": "local profile: build only this arch (repeatable; default every arch of each variant: "
                    "a foreign one runs under qemu)",
            "variant": "variant id (repeatable; default: every variant the profile can build, naming those "
                       "it leaves out)", **VARIANTS_HELP})
@exits_cleanly
def ci_generate(c, out="build/ci/child-protected.yml", profile="production", refs=None, builder=None, registry=None,
                variant=None, arch=None, variants_file="variants.yaml"):
    """Write the GitLab child pipeline for the matrix (per variant x arch jobs, a needs: DAG)."""
    from rapidship.ci import pipeline as ci

    arches = tuple(arch_flag(a) for a in arch) if arch else None
    chosen = ci.profile_for(profile, builder, registry, arches, refs)
    m = load_matrix(variants_file)
    path = ci.write_pipeline(m, chosen, Path(out), variant or None)
    count = len(ci.jobs(m, chosen, variant or None))
    skipped = {} if variant else ci.left_out(m, chosen)
    for vid, why in skipped.items():
        console.err.print(f"left out {vid}: {why}")
    kind = f", {chosen.refs} refs" if chosen.refs else ""
    console.err.print(f"wrote {path}: {count} jobs for "
                      f"{', '.join(v.id for v in m.select(variant or None) if v.id not in skipped)} "
                      f"({chosen.name}{kind}, builder {chosen.builder.value})")


@task(name="build", help={"variant": "variant id", "arch": "amd64 or arm64", **VARIANTS_HELP})
@exits_cleanly
def ci_build(c, variant, arch, variants_file="variants.yaml"):
    """CI runners without a daemon: build with $RAPIDSHIP_BUILDER (buildctl|kaniko), push a candidate tag."""
    import os

    from pathlib import Path

    from rapidship.imagebuild.buildkit import BuildSecrets, plan_build
    from rapidship.imagebuild.normalise import source_date_epoch
    from rapidship.imagebuild.daemonless import build_staged, cache_refs, candidate_ref, write_staged
    from rapidship.render.dockerfile import render as render_variant

    v = load_matrix(variants_file).get(variant)
    a = arch_flag(arch)
    secrets = BuildSecrets.from_flags(None, None, None)
    rendered = render_variant(v)
    revision = os.environ.get("CI_COMMIT_SHA", "")
    plan = plan_build(v, a, rendered, secrets, revision, epoch=source_date_epoch(Path.cwd()))
    push_ref = candidate_ref(v, a, os.environ.get("RAPIDSHIP_REGISTRY", ""), os.environ.get("RAPIDSHIP_CANDIDATE_SUFFIX", ""))
    builder = os.environ.get("RAPIDSHIP_BUILDER", "buildctl")
    log = Workspace().build_log(v.id, a.value)
    with console.status(f"{builder}: building {push_ref}") as status:
        staged = build_staged(plan, secrets, builder, push_ref,
                              cache_refs(v, a, os.environ), log, status.update)
    console.err.print(f"pushed {staged.ref} {staged.digest} in {staged.seconds}s -> "
                      f"{write_staged(Workspace(), staged)}")


@task(name="pull", help={"variant": "variant id", "arch": "amd64 or arm64 (default: every arch of the variant)",
                         **VARIANTS_HELP})
@exits_cleanly
def ci_pull(c, variant, arch=None, variants_file="variants.yaml"):
    """Pull the build job's candidate into this runner's engine and write build/<variant>/build-<arch>.json."""
    from rapidship.imagebuild.daemonless import pull_staged
    from rapidship.imagebuild.buildkit import write_record

    v = load_matrix(variants_file).get(variant)
    for a in ([arch_flag(arch)] if arch else v.arches):
        with console.status(f"pulling {v.id} {a.value}"):
            built = pull_staged(Workspace(), a.value, v)
        console.err.print(f"pulled {built.extra['digest']} as {built.ref} -> {write_record(Workspace(), built)}")


@task(name="runners", iterable=["require"],
      help={"pipeline": "the generated pipeline file to check (every job with a protected secret carries a "
                        "protected runner tag; merge-request jobs never do), then its runners",
            "offline": "check the file only; ask GitLab nothing",
            "require": "a runner tag that protected online runners, and only protected ones, must carry "
                       "(repeatable)"})
@exits_cleanly
def ci_runners(c, pipeline=None, offline=False, require=None):
    """Check that jobs with protected secrets run only on protected runners.
    Fails at once, naming the job or the tag, unless every job with a protected secret carries a
    protected runner tag and protected online runners, and only they, carry the tags of each such job."""
    from rapidship.ci.runners import check_pipeline, require as check
    from rapidship.config.yamlconf import load_yaml, read_config
    from rapidship.errors import ConfigError

    if not pipeline and not require:
        raise ConfigError("--pipeline / --require", "nothing to check",
                          "pass --pipeline build/ci/child-protected.yml")
    if offline and require:
        raise ConfigError("--offline", "--require asks GitLab", "drop one of them")
    runners = {}
    if pipeline:
        doc = load_yaml(read_config(Path(pipeline), "run `invoke ci.generate` first, or name the file it wrote"),
                        pipeline)
        if not isinstance(doc, dict):
            raise ConfigError(pipeline, "not a pipeline (a YAML mapping of jobs)", "pass the file ci.generate wrote")
        runners.update({r.id: r for r in check_pipeline(doc, ask=not offline)})
        if offline:
            console.err.print(f"{pipeline}: every job with a protected secret carries a protected runner tag, "
                              "and no job that may run on an unprotected ref does")
    for tag in require or ():
        runners.update({r.id: r for r in check(tag)})
    ready = [r for r in runners.values() if r.online and not r.paused]
    if ready:
        console.err.print(f"{len(ready)} protected runner(s) online: "
                          + ", ".join(f"{r.id} ({r.description}: {', '.join(r.tags)})" for r in ready))


@task(name="variables", help={"file": "the project's CI/CD variables as GitLab's API lists them "
                                      "(GET /projects/:id/variables, JSON)"})
@exits_cleanly
def ci_variables(c, file=None):
    """Check a project's CI variables: no merge-request job may see a protected build's credential.

    Exits 2 naming each variable that would let it: not masked, not protected, scoped elsewhere, a
    mapped name set directly, a value shared with a protected one."""
    from rapidship.ci.variables import check
    from rapidship.errors import ConfigError

    if not file:
        raise ConfigError("--file", "names no file", "pass --file variables.json (GET /projects/:id/variables)")
    n = check(Path(file))
    console.err.print(f"{file}: {n} variable(s); every credential is masked, protected and scoped as docs/ci.md "
                      "says, and merge requests get none of the protected builds'")


@task(name="test", help={"markers": "pytest -m expression (default: the suite's own default)",
                         "junit": "write a JUnit XML report here (GitLab shows it on the merge request)"})
def ci_test(c, markers=None, junit=None):
    """Run the test suite (what the root pipeline's test jobs call)."""
    import shlex

    args = ["python3", "-m", "pytest", "-q"]
    args += ["-m", markers] if markers else []
    args += [f"--junitxml={junit}"] if junit else []
    c.run(" ".join(shlex.quote(a) for a in args), pty=False)


ci_tasks = Collection("ci", ci_generate, ci_build, ci_pull, ci_runners, ci_variables, ci_test)
