# The build job's image (RAPIDSHIP_BUILDKIT_IMAGE): rootless BuildKit with rapidship installed, so
# the job can run `invoke ci.build`. Build it once per site from the project root, e.g.
#   buildctl-daemonless.sh build --frontend dockerfile.v0 --local context=. --local dockerfile=ci/images \
#     --opt filename=buildkit.Dockerfile --output type=image,name=$HARBOR_HOST/rapidship-ci/buildkit:<version>,push=true
# and pin BUILDKIT_IMAGE by digest through the Harbor proxy cache.
ARG BUILDKIT_IMAGE=harbor.example.internal/dockerhub/moby/buildkit:v0.18.2-rootless
FROM ${BUILDKIT_IMAGE}
USER 0
# Alpine's python3 follows the pinned BuildKit image's Alpine release: pin the base, not apk packages.
# hadolint ignore=DL3018
RUN apk add --no-cache python3 git
COPY pyproject.toml README.md tasks.py variants.yaml /opt/rapidship-src/
COPY src /opt/rapidship-src/src
RUN python3 -m venv /opt/rapidship \
    && /opt/rapidship/bin/pip install --no-cache-dir /opt/rapidship-src
ENV PATH=/opt/rapidship/bin:$PATH
# rootless BuildKit runs as the image's unprivileged user (uid 1000 in moby/buildkit:rootless)
USER 1000:1000
