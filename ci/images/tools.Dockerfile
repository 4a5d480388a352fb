# The default job image (RAPIDSHIP_CI_IMAGE) for jobs that need no engine: lint, unit tests,
# render, generate. Jobs tagged `docker` run on runners with their own dockerd (docs/ci.md).
ARG PYTHON_IMAGE=harbor.example.internal/dockerhub/library/python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends git zstd \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md /opt/rapidship-src/
COPY src /opt/rapidship-src/src
RUN pip install --no-cache-dir "/opt/rapidship-src[test]"
