# Rendered by rapidship from templates/deb/Dockerfile.j2 for variant cuda12-ubuntu22 (rapidship/rapids:26.10-cuda12.9-ubuntu22.04-py3.11). Do not edit:
# change the template or variants.yaml and run `invoke render`.
# Secrets enter only as BuildKit secrets: cacert (CA bundle), pip-index (index URL, may carry a
# token), pipconf (pip.conf), conda-channels (channel URLs), apt-auth (apt auth.conf).
# Bases are build args only so a local engine can name each arch's stand-in base differently.
ARG BUILDER_BASE=harbor.example.internal/dockerhub/library/python:3.11-slim-bookworm
ARG RUNTIME_BASE=harbor.example.internal/dockerhub/library/ubuntu:22.04

# ---- builder: conda env from the lock, packed with conda-pack ----
FROM ${BUILDER_BASE} AS builder
ARG TARGETARCH
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY lock/ /tmp/lock/
COPY builder/install_lock.py builder/measure_trims.py /tmp/builder/
# Installer tools (py-rattler, conda-pack) come from the pinned, hashed tools lock.
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3 -m venv /opt/installer \
 && /opt/installer/bin/pip install --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check \
      -r /tmp/lock/tools.txt
# Install into a long build prefix, then let conda-pack rewrite text and binary prefixes to /opt/rapids.
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=secret,id=conda-channels,required=false \
    --mount=type=cache,target=/root/.cache/rapidship-conda,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && /opt/installer/bin/python /tmp/builder/install_lock.py --lock /tmp/lock/conda-${TARGETARCH}.lock \
      --prefix /opt/rapidship-build/envs/placeholder-prefix-for-relocation --channels-secret /run/secrets/conda-channels \
 && /opt/installer/bin/python /tmp/builder/measure_trims.py --prefix /opt/rapidship-build/envs/placeholder-prefix-for-relocation --style pack \
      --trim '*.a' 'static libraries: read only when building against the library, never by a running env' \
      --trim 'include/*' 'C and C++ headers: read only when building against the library, never by a running env' \
      --trim 'pkgs/*' 'the package cache conda installed from' \
      --trim 'conda-meta/*.json.bak' 'backup copies of the conda package records' \
      --trim 'share/doc/*' 'documentation' \
      --trim 'share/man/*' 'manual pages' \
      --trim 'share/info/*' 'info pages' \
      --trim 'share/gtk-doc/*' 'documentation' \
      --trim 'lib/python*/site-packages/*/tests/*' 'test suites of the packages' \
      --trim 'lib/cmake/*' 'CMake package files: read only when building against the library, never by a running env' \
      --trim 'lib/pkgconfig/*' 'pkg-config files: read only when building against the library, never by a running env' \
      --trim 'share/pkgconfig/*' 'pkg-config files: read only when building against the library, never by a running env' \
      --trim 'CACHEDIR.TAG' 'a cache marker' \
      --out /out/rapidship-trims.json \
 && /opt/installer/bin/conda-pack --prefix /opt/rapidship-build/envs/placeholder-prefix-for-relocation --dest-prefix /opt/rapids \
      --compress-level 0 --output /tmp/env.tar --quiet \
      --exclude '*.a' \
      --exclude 'include/*' \
      --exclude 'pkgs/*' \
      --exclude 'conda-meta/*.json.bak' \
      --exclude 'share/doc/*' \
      --exclude 'share/man/*' \
      --exclude 'share/info/*' \
      --exclude 'share/gtk-doc/*' \
      --exclude 'lib/python*/site-packages/*/tests/*' \
      --exclude 'lib/cmake/*' \
      --exclude 'lib/pkgconfig/*' \
      --exclude 'share/pkgconfig/*' \
      --exclude 'CACHEDIR.TAG' \
 && mkdir -p /out/opt/rapids && tar -xf /tmp/env.tar -C /out/opt/rapids && rm /tmp/env.tar
# ---- device code pruned to gpu_archs 80,90: each rewritten library proven against its
#      original and listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole ----
COPY builder/prune/ /tmp/builder/prune/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/rapidship-prune.json /out/opt/rapids

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

COPY --from=builder /out/opt/rapids /opt/rapids
COPY --from=builder /out/rapidship-trims.json /opt/rapidship/trims.json
COPY --from=builder /out/rapidship-prune.json /opt/rapidship/prune.json
COPY runtime/bin/ /usr/local/bin/
COPY runtime/rapids_runtime/ /opt/rapidship/rapids_runtime/
COPY runtime/rapidship-gpu-guard.pth runtime/sitecustomize.py /opt/rapids/lib/python3.11/site-packages/
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
    NVIDIA_REQUIRE_CUDA="cuda>=12.9"
LABEL org.opencontainers.image.title="rapidship/rapids" \
      org.opencontainers.image.description="RAPIDS 26.10 on CUDA 12.9, ubuntu 22.04, Python 3.11" \
      org.opencontainers.image.version="26.10-cuda12.9-ubuntu22.04-py3.11" \
      org.opencontainers.image.vendor="rapidship" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="harbor.example.internal/dockerhub/library/ubuntu:22.04" \
      io.rapidship.variant="cuda12-ubuntu22" \
      io.rapidship.rapids.version="26.10" \
      io.rapidship.cuda.version="12.9" \
      io.rapidship.python.version="3.11" \
      io.rapidship.env.flavour="conda" \
      io.rapidship.gpu.archs="80,90" \
      io.rapidship.lock.sha256="e8d73474f36f39d1c37d7c777471cda10afb7ac872f5c9f3c3521b49bc529c52"
USER 1001:0
WORKDIR /home/rapids
ENTRYPOINT ["/usr/local/bin/rapids-entrypoint"]
CMD ["python"]
