# Rendered by rapidship from templates/deb/Dockerfile.j2 for variant cpu-debian12 (rapidship/dask:26.10-cpu-debian12-py3.11). Do not edit:
# change the template or variants.yaml and run `invoke render`.
# Secrets enter only as BuildKit secrets: cacert (CA bundle), pip-index (index URL, may carry a
# token), pipconf (pip.conf), conda-channels (channel URLs), apt-auth (apt auth.conf).
# Bases are build args only so a local engine can name each arch's stand-in base differently.
ARG BUILDER_BASE=harbor.example.internal/dockerhub/library/debian:bookworm-slim
ARG RUNTIME_BASE=harbor.example.internal/dockerhub/library/debian:bookworm-slim

# ---- builder: python, the venv at /opt/rapids (its pip installs every layer's wheels), the builder's programs ----
# It runs on the build machine's platform and installs the target arch's wheels (pip --platform
# --target: exact tags, hashes checked, no target interpreter run), so an arm64 image builds
# without emulating pip; only the runtime stage's apt runs under qemu.
FROM --platform=$BUILDPLATFORM ${BUILDER_BASE} AS builder
ARG TARGETARCH
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN --mount=type=secret,id=apt-auth,target=/etc/apt/auth.conf.d/rapidship.conf,required=false \
    apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY builder/install_layer.py builder/measure_trims.py builder/target_layout.py builder/trims.json /tmp/builder/
RUN python3.11 -m venv /opt/rapids
# ---- env layer compiled/numpy ----
FROM builder AS env-1-made
ARG TARGETARCH
COPY lock/parts/compiled/numpy/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/numpy --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numpy --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 1
# ---- env layer compiled/small_2 ----
FROM builder AS env-2-made
ARG TARGETARCH
COPY lock/parts/compiled/small_2/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/small_2 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_2 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 2
# ---- env layer compiled/small_1 ----
FROM builder AS env-3-made
ARG TARGETARCH
COPY lock/parts/compiled/small_1/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/small_1 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_1 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 3
# ---- env layer compiled/small_3 ----
FROM builder AS env-4-made
ARG TARGETARCH
COPY lock/parts/compiled/small_3/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/small_3 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_3 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 4
# ---- env layer python/dask ----
FROM builder AS env-5-made
ARG TARGETARCH
COPY lock/parts/python/dask/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/python/dask --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/dask --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 5
# ---- env layer python/distributed ----
FROM builder AS env-6-made
ARG TARGETARCH
COPY lock/parts/python/distributed/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/python/distributed --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/distributed --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 6
# ---- env layer python/small_1 ----
FROM builder AS env-7-made
ARG TARGETARCH
COPY lock/parts/python/small_1/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/python/small_1 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_1 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 7
# ---- env layer python/small_2 ----
FROM builder AS env-8-made
ARG TARGETARCH
COPY lock/parts/python/small_2/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/python/small_2 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_2 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 8
# ---- env layer venv ----
FROM builder AS env-9-made
ARG TARGETARCH
RUN /opt/rapids/bin/python -m pip uninstall -y --disable-pip-version-check setuptools pip \
 && mkdir -p /out/layers/venv && cp -a /opt/rapids/. /out/layers/venv/ \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/venv --records /out/records \
      --trims /tmp/builder/trims.json
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/venv --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 9
# ---- every layer's large files, by content: each layer's copies of a file below, planned as links ----
FROM builder AS env-index
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,from=env-1-made,source=/out/records,target=/parts/1 \
    --mount=type=bind,from=env-2-made,source=/out/records,target=/parts/2 \
    --mount=type=bind,from=env-3-made,source=/out/records,target=/parts/3 \
    --mount=type=bind,from=env-4-made,source=/out/records,target=/parts/4 \
    --mount=type=bind,from=env-5-made,source=/out/records,target=/parts/5 \
    --mount=type=bind,from=env-6-made,source=/out/records,target=/parts/6 \
    --mount=type=bind,from=env-7-made,source=/out/records,target=/parts/7 \
    --mount=type=bind,from=env-8-made,source=/out/records,target=/parts/8 \
    --mount=type=bind,from=env-9-made,source=/out/records,target=/parts/9 \
    python3.11 /mnt/dedupe.py --plan-links /parts/*/big.json --out /out/links
FROM env-1-made AS env-1
RUN --mount=type=bind,from=env-index,source=/out/links/1.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numpy --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/numpy --layer compiled/numpy --out /out/records/layer.json
FROM env-2-made AS env-2
RUN --mount=type=bind,from=env-index,source=/out/links/2.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_2 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/small_2 --layer compiled/small_2 --out /out/records/layer.json
FROM env-3-made AS env-3
RUN --mount=type=bind,from=env-index,source=/out/links/3.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_1 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/small_1 --layer compiled/small_1 --out /out/records/layer.json
FROM env-4-made AS env-4
RUN --mount=type=bind,from=env-index,source=/out/links/4.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_3 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/small_3 --layer compiled/small_3 --out /out/records/layer.json
FROM env-5-made AS env-5
RUN --mount=type=bind,from=env-index,source=/out/links/5.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/dask --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/dask --layer python/dask --out /out/records/layer.json
FROM env-6-made AS env-6
RUN --mount=type=bind,from=env-index,source=/out/links/6.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/distributed --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/distributed --layer python/distributed --out /out/records/layer.json
FROM env-7-made AS env-7
RUN --mount=type=bind,from=env-index,source=/out/links/7.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_1 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/small_1 --layer python/small_1 --out /out/records/layer.json
FROM env-8-made AS env-8
RUN --mount=type=bind,from=env-index,source=/out/links/8.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_2 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/small_2 --layer python/small_2 --out /out/records/layer.json
FROM env-9-made AS env-9
RUN --mount=type=bind,from=env-index,source=/out/links/9.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/venv --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/venv --layer venv --out /out/records/layer.json
# ---- the env's records, from every layer's ----
FROM builder AS env-records
RUN --mount=type=bind,source=builder/layer-plan.json,target=/mnt/layer-plan.json \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,from=env-1,source=/out/records,target=/parts/1 \
    --mount=type=bind,from=env-2,source=/out/records,target=/parts/2 \
    --mount=type=bind,from=env-3,source=/out/records,target=/parts/3 \
    --mount=type=bind,from=env-4,source=/out/records,target=/parts/4 \
    --mount=type=bind,from=env-5,source=/out/records,target=/parts/5 \
    --mount=type=bind,from=env-6,source=/out/records,target=/parts/6 \
    --mount=type=bind,from=env-7,source=/out/records,target=/parts/7 \
    --mount=type=bind,from=env-8,source=/out/records,target=/parts/8 \
    --mount=type=bind,from=env-9,source=/out/records,target=/parts/9 \
    mkdir -p /out/records \
 && python3.11 /mnt/layer_record.py merge --plan /mnt/layer-plan.json --out /out/records/layers.json /parts/* \
 && python3.11 /tmp/builder/measure_trims.py --merge /parts/*/trims.json --out /out/records/trims.json \
 && python3.11 /mnt/dedupe.py --merge /parts/*/dedupe.json --out /out/records/dedupe.json

# ---- runtime: the OS base, the env, a non-root user; no compilers, no package caches ----
FROM ${RUNTIME_BASE} AS runtime
ARG TARGETARCH
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN --mount=type=secret,id=apt-auth,target=/etc/apt/auth.conf.d/rapidship.conf,required=false \
    --mount=type=bind,source=builder/hash_pycs.py,target=/mnt/hash_pycs.py \
    apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3.11 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log \
    /var/cache/debconf/*-old /var/lib/dpkg/*-old \
 && if [ -x /usr/bin/python3.11 ]; then /usr/bin/python3.11 /mnt/hash_pycs.py \
      /usr/lib/python3.11 /usr/lib64/python3.11 /usr/lib/python3/dist-packages; fi \
 && useradd --no-log-init --uid 1001 --gid 0 --home-dir /home/rapids --create-home --shell /bin/bash rapids \
 && sed -i -E 's/^(rapids:[^:]*:)[0-9]*:/\1:/' /etc/shadow \
 && rm -f /var/cache/ldconfig/aux-cache \
 && mkdir -p /spill \
 && chown 1001:0 /home/rapids /spill \
 && chmod 0770 /home/rapids /spill \
 && find / -xdev -type f -perm /6000 -exec chmod a-s {} + \
 && rm -rf /tmp/* /var/tmp/*

COPY --from=env-1 /out/layers/compiled/numpy/ /opt/rapids/
COPY --from=env-2 /out/layers/compiled/small_2/ /opt/rapids/
COPY --from=env-3 /out/layers/compiled/small_1/ /opt/rapids/
COPY --from=env-4 /out/layers/compiled/small_3/ /opt/rapids/
COPY --from=env-5 /out/layers/python/dask/ /opt/rapids/
COPY --from=env-6 /out/layers/python/distributed/ /opt/rapids/
COPY --from=env-7 /out/layers/python/small_1/ /opt/rapids/
COPY --from=env-8 /out/layers/python/small_2/ /opt/rapids/
COPY --from=env-9 /out/layers/venv/ /opt/rapids/
COPY --from=env-records /out/records/ /opt/rapidship/
COPY runtime/bin/ /usr/local/bin/
COPY runtime/rapids_runtime/ /opt/rapidship/rapids_runtime/
COPY runtime/rapidship-gpu-guard.pth runtime/sitecustomize.py /opt/rapids/lib/python3.11/site-packages/
# the runtime package compiled, as the env is (its imports at every start cost half as much), and the
# GPU guard's names: every top-level package of a distribution that ships device code. -S: without
# it the env's .pth imports the guard first and leaves timestamp .pyc files that compileall keeps
# (two builds then differ by the sources' mtimes); an env without python (a test variant) skips it
RUN if [ -x /opt/rapids/bin/python ]; then /opt/rapids/bin/python -I -S -m compileall -q \
      --invalidation-mode unchecked-hash /opt/rapidship/rapids_runtime; fi
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
LABEL org.opencontainers.image.title="rapidship/dask" \
      org.opencontainers.image.description="Dask spill runtime (no CUDA), debian 12, Python 3.11" \
      org.opencontainers.image.version="26.10-cpu-debian12-py3.11" \
      org.opencontainers.image.vendor="rapidship" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="harbor.example.internal/dockerhub/library/debian:bookworm-slim" \
      io.rapidship.variant="cpu-debian12" \
      io.rapidship.rapids.version="26.10" \
      io.rapidship.cuda.version="none" \
      io.rapidship.python.version="3.11" \
      io.rapidship.env.flavour="pip" \
      io.rapidship.gpu.archs="none" \
      io.rapidship.lock.sha256="3fc9187725657868dfd0ebf5398a17f06138553205165cc3579b726732f350fd"
USER 1001:0
WORKDIR /home/rapids
ENTRYPOINT ["/usr/local/bin/rapids-entrypoint"]
CMD ["python"]
