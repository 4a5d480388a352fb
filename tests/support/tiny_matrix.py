"""A one-variant matrix (cpu-debian12, amd64 + arm64) for images the registry tests build themselves."""

VARIANT = "cpu-debian12"
VARIANTS_YAML = """
defaults:
  registry_prefix: harbor.example.internal/dockerhub
  budget_bytes: 1000000
  uid: 1001
  user: rapids
  rapids: "26.10"
  python: "3.11"
  flavour: pip
  image: {image}
  env: dask-cpu
  conda_builder: library/python:3.11-slim-bookworm
oses:
  debian12: {{family: deb, distro: debian, version: "12", arches: [amd64, arm64],
             image: library/debian:bookworm-slim, python: "3.11"}}
axes: {{cuda: [cpu], os: [debian12]}}
"""


def tiny_ref(name: str, arch: str) -> str:
    """The engine's name `invoke build` would give VARIANT's image of repository `name`: the
    variant's tag and this run's identity (config.matrix.run_id)."""
    from rapidship.config.matrix import run_id

    run = run_id()
    return f"{name}:26.10-cpu-debian12-py3.11-{arch}" + (f"-{run}" if run else "")


def build_tiny(work, label: str, dockerfile: str) -> tuple:
    """Two images of VARIANT built here (amd64, arm64; FROM scratch, so no emulation): `dockerfile`
    COPYs ${TARGETARCH}.txt. Returns (variants file, image name, {arch: ref}); `remove` them after."""
    import os
    import subprocess
    import uuid
    from datetime import datetime, timezone

    from rapidship.engine import ENGINE

    name = f"rapidship-test-{uuid.uuid4().hex[:10]}/{label}"
    (work / "variants.yaml").write_text(VARIANTS_YAML.format(image=name))
    ctx = work / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(dockerfile)
    refs = {}
    # the release label `invoke build` sets on every image (sign refuses an image that states none)
    created = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    for arch in ("amd64", "arm64"):
        (ctx / f"{arch}.txt").write_text(f"built for {arch}\n")
        refs[arch] = tiny_ref(name, arch)
        subprocess.run([ENGINE.buildkit_cli(), "build", "-q", "--platform", f"linux/{arch}", "-t", refs[arch],
                        "--label", f"org.opencontainers.image.created={created}", str(ctx)],
                       check=True, capture_output=True, env=dict(os.environ, DOCKER_BUILDKIT="1"))
    return work / "variants.yaml", name, refs


def remove(refs: dict) -> None:
    import subprocess

    subprocess.run(["docker", "rmi", *refs.values()], capture_output=True, check=False)
