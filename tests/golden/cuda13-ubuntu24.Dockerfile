# Rendered by rapidship from templates/deb/Dockerfile.j2 for variant cuda13-ubuntu24 (rapidship/rapids:26.10-cuda13.0-ubuntu24.04-py3.12). Do not edit:
# change the template or variants.yaml and run `invoke render`.
# Secrets enter only as BuildKit secrets: cacert (CA bundle), pip-index (index URL, may carry a
# token), pipconf (pip.conf), conda-channels (channel URLs), apt-auth (apt auth.conf).
# Bases are build args only so a local engine can name each arch's stand-in base differently.
ARG BUILDER_BASE=harbor.example.internal/dockerhub/library/python:3.11-slim-bookworm
ARG RUNTIME_BASE=harbor.example.internal/dockerhub/library/ubuntu:24.04

# ---- builder: the installer tools; each env layer below is installed from its part of the conda lock
#      and packed with conda-pack ----
FROM ${BUILDER_BASE} AS builder
ARG TARGETARCH
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY lock/tools.txt /tmp/lock/tools.txt
COPY builder/install_lock.py builder/pack_layer.py builder/measure_trims.py builder/trims.json /tmp/builder/
# Installer tools (py-rattler, conda-pack; cuobjdump for the pruner) come from the pinned, hashed tools lock.
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3 -m venv /opt/installer \
 && /opt/installer/bin/pip install --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check \
      -r /tmp/lock/tools.txt
# ---- env layer env ----
FROM builder AS env-1-made
ARG TARGETARCH
RUN /opt/installer/bin/python /tmp/builder/pack_layer.py --rest --out /out/layers/env --records /out/records \
      --trims /tmp/builder/trims.json
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    /opt/installer/bin/python /mnt/dedupe.py --prefix /out/layers/env --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 1
# ---- every layer's large files, by content: each layer's copies of a file below, planned as links ----
FROM builder AS env-index
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,from=env-1-made,source=/out/records,target=/parts/1 \
    /opt/installer/bin/python /mnt/dedupe.py --plan-links /parts/*/big.json --out /out/links
FROM env-1-made AS env-1
RUN --mount=type=bind,from=env-index,source=/out/links/1.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    /opt/installer/bin/python /mnt/dedupe.py --prefix /out/layers/env --links /mnt/links.json --out /out/records/dedupe.json \
 && /opt/installer/bin/python /mnt/layer_record.py measure --prefix /out/layers/env --layer env --out /out/records/layer.json
# ---- the env's records, from every layer's ----
FROM builder AS env-records
RUN --mount=type=bind,source=builder/layer-plan.json,target=/mnt/layer-plan.json \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/prune,target=/mnt/prune \
    --mount=type=bind,from=env-1,source=/out/records,target=/parts/1 \
    mkdir -p /out/records \
 && /opt/installer/bin/python /mnt/layer_record.py merge --plan /mnt/layer-plan.json --out /out/records/layers.json /parts/* \
 && /opt/installer/bin/python /tmp/builder/measure_trims.py --merge /parts/*/trims.json --out /out/records/trims.json \
 && /opt/installer/bin/python /mnt/dedupe.py --merge /parts/*/dedupe.json --out /out/records/dedupe.json \
 && PYTHONPATH=/mnt /opt/installer/bin/python -m prune.merge --record /out/records/prune.json /parts/*/prune.json

# ---- runtime: the OS base, the env, a non-root user; no compilers, no package caches ----
FROM ${RUNTIME_BASE} AS runtime
ARG TARGETARCH
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN --mount=type=secret,id=apt-auth,target=/etc/apt/auth.conf.d/rapidship.conf,required=false \
    --mount=type=bind,source=builder/hash_pycs.py,target=/mnt/hash_pycs.py \
    apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log \
    /var/cache/debconf/*-old /var/lib/dpkg/*-old \
 && if [ -x /usr/bin/python3.12 ]; then /usr/bin/python3.12 /mnt/hash_pycs.py \
      /usr/lib/python3.12 /usr/lib64/python3.12 /usr/lib/python3/dist-packages; fi \
 && useradd --no-log-init --uid 1001 --gid 0 --home-dir /home/rapids --create-home --shell /bin/bash rapids \
 && sed -i -E 's/^(rapids:[^:]*:)[0-9]*:/\1:/' /etc/shadow \
 && rm -f /var/cache/ldconfig/aux-cache \
 && mkdir -p /spill \
 && chown 1001:0 /home/rapids /spill \
 && chmod 0770 /home/rapids /spill \
 && find / -xdev -type f -perm /6000 -exec chmod a-s {} + \
 && rm -rf /tmp/* /var/tmp/*

COPY --from=env-1 /out/layers/env/ /opt/rapids/
COPY --from=env-records /out/records/ /opt/rapidship/
COPY runtime/bin/ /usr/local/bin/
COPY runtime/rapids_runtime/ /opt/rapidship/rapids_runtime/
COPY runtime/rapidship-gpu-guard.pth runtime/sitecustomize.py /opt/rapids/lib/python3.12/site-packages/
# the runtime package compiled, as the env is (its imports at every start cost half as much), and the
# GPU guard's names: every top-level package of a distribution that ships device code. -S: without
# it the env's .pth imports the guard first and leaves timestamp .pyc files that compileall keeps
# (two builds then differ by the sources' mtimes); an env without python (a test variant) skips it
RUN if [ -x /opt/rapids/bin/python ]; then /opt/rapids/bin/python -I -S -m compileall -q \
      --invalidation-mode unchecked-hash /opt/rapidship/rapids_runtime; fi \
 && PYTHONPATH=/opt/rapidship /opt/rapids/bin/python -S -m rapids_runtime.gpu_guard /opt/rapids /opt/rapidship/prune.json \
      > /opt/rapidship/guarded.txt
ENV PATH=/opt/rapids/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/home/rapids \
    RAPIDS_PREFIX=/opt/rapids \
    RAPIDS_SPILL_DIR=/spill \
    DASK_TEMPORARY_DIRECTORY=/spill \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    XDG_CACHE_HOME=/tmp/.cache \
    CUPY_CACHE_DIR=/tmp/.cache/cupy \
    NUMBA_CACHE_DIR=/tmp/.cache/numba \
    MPLCONFIGDIR=/tmp/.cache/matplotlib
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=13.0"
LABEL org.opencontainers.image.title="rapidship/rapids" \
      org.opencontainers.image.description="RAPIDS 26.10 on CUDA 13.0, ubuntu 24.04, Python 3.12" \
      org.opencontainers.image.version="26.10-cuda13.0-ubuntu24.04-py3.12" \
      org.opencontainers.image.vendor="rapidship" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="harbor.example.internal/dockerhub/library/ubuntu:24.04" \
      io.rapidship.variant="cuda13-ubuntu24" \
      io.rapidship.rapids.version="26.10" \
      io.rapidship.cuda.version="13.0" \
      io.rapidship.python.version="3.12" \
      io.rapidship.env.flavour="conda" \
      io.rapidship.gpu.archs="80,90" \
      io.rapidship.lock.sha256="e8d73474f36f39d1c37d7c777471cda10afb7ac872f5c9f3c3521b49bc529c52"
USER 1001:0
WORKDIR /home/rapids
ENTRYPOINT ["/usr/local/bin/rapids-entrypoint"]
CMD ["python"]
