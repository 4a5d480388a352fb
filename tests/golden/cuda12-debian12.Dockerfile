# Rendered by rapidship from templates/deb/Dockerfile.j2 for variant cuda12-debian12 (rapidship/rapids:26.10-cuda12.9-debian12-py3.11). Do not edit:
# change the template or variants.yaml and run `invoke render`.
# Secrets enter only as BuildKit secrets: cacert (CA bundle), pip-index (index URL, may carry a
# token), pipconf (pip.conf), conda-channels (channel URLs), apt-auth (apt auth.conf).
# Bases are build args only so a local engine can name each arch's stand-in base differently.
ARG BUILDER_BASE=harbor.example.internal/dockerhub/library/debian:bookworm-slim
ARG RUNTIME_BASE=harbor.example.internal/dockerhub/library/debian:bookworm-slim

# ---- builder: a venv at /opt/rapids from the hashed pip lock (wheels only, no compilers) ----
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
COPY lock/ /tmp/lock/
COPY builder/measure_trims.py builder/dedupe.py builder/target_layout.py /tmp/builder/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 -m venv /opt/rapids \
 && case "${TARGETARCH}" in amd64) machine=x86_64 ;; arm64) machine=aarch64 ;; \
      *) echo "no wheel platform for TARGETARCH=${TARGETARCH}" >&2; exit 1 ;; esac \
 && platforms=(--platform "manylinux2014_${machine}") \
 && for minor in $(seq 17 36); do platforms+=(--platform "manylinux_2_${minor}_${machine}"); done \
 && /opt/rapids/bin/pip install --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check \
      --no-compile --implementation cp --python-version 3.11 "${platforms[@]}" \
      --target /opt/rapids/lib/python3.11/site-packages -r "/tmp/lock/requirements-${TARGETARCH}.txt" \
 && python3.11 /tmp/builder/target_layout.py --site /opt/rapids/lib/python3.11/site-packages --prefix /opt/rapids \
 && /opt/rapids/bin/python -m pip uninstall -y --disable-pip-version-check setuptools pip \
 && python3.11 /tmp/builder/measure_trims.py --prefix /opt/rapids --style find \
      --trim '*/site-packages/*/tests' 'test suites of the packages' \
      --trim '*.a' 'static libraries: read only when building against the library, never by a running env' \
      --trim '*/site-packages/lib*/include' 'the RAPIDS C++ headers: read only when building against the library, never by a running env' \
      --trim '*/site-packages/pyarrow/include' 'Arrow C++ headers: read only when building against the library, never by a running env' \
      --trim '*/site-packages/*/lib64/cmake' 'CMake package files: read only when building against the library, never by a running env' \
      --trim '*/site-packages/*/lib/cmake' 'CMake package files: read only when building against the library, never by a running env' \
      --trim '*/site-packages/*/lib/pkgconfig' 'pkg-config files: read only when building against the library, never by a running env' \
      --trim '*/site-packages/nvidia/cuda_nvrtc/lib/*.alt.so*' 'the alternate build of NVRTC and its builtins (only libnvrtc.alt names them); libnvrtc.so stays: traced on a GPU, no import, numba kernel or cuDF UDF loads or starts it (docs/prune.md)' \
      --trim '*/site-packages/nvidia/cuda_nvcc/bin/ptxas' 'the PTX assembler program; numba-cuda compiles through libnvvm and links through nvJitLink: traced on a GPU, no import, numba kernel or cuDF UDF loads or starts it (docs/prune.md)' \
      --trim '*/site-packages/nvidia/libnvcomp/bin/nvlzcat' 'the nvCOMP command-line decompressor; cuDF uses libnvcomp.so: traced on a GPU, no import, numba kernel or cuDF UDF loads or starts it (docs/prune.md)' \
      --trim '*/site-packages/nvidia/nccl/lib/libnccl_device.*' 'the bitcode and LTO-IR of the NCCL device API, for programs that compile their own kernels against nccl_device.h; libnccl.so and the RAPIDS comms never read them (docs/prune.md)' \
      --out /out/rapidship-trims.json \
 && find /opt/rapids -depth -path '*/site-packages/*/tests' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*.a' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*/site-packages/lib*/include' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*/site-packages/pyarrow/include' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*/site-packages/*/lib64/cmake' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*/site-packages/*/lib/cmake' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*/site-packages/*/lib/pkgconfig' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*/site-packages/nvidia/cuda_nvrtc/lib/*.alt.so*' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*/site-packages/nvidia/cuda_nvcc/bin/ptxas' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*/site-packages/nvidia/libnvcomp/bin/nvlzcat' -exec rm -rf {} + \
 && find /opt/rapids -depth -path '*/site-packages/nvidia/nccl/lib/libnccl_device.*' -exec rm -rf {} + \
 && /opt/rapids/bin/python -I -S -m compileall -f -q -j 0 --invalidation-mode unchecked-hash /opt/rapids/lib \
 && mkdir -p /out/opt/rapids && cp -a /opt/rapids/. /out/opt/rapids/
# ---- device code pruned to gpu_archs 80,90: each rewritten library proven against its
#      original and listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole ----
COPY builder/prune/ /tmp/builder/prune/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 -m venv /opt/installer \
 && /opt/installer/bin/pip install --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check \
      -r /tmp/lock/tools.txt \
 && PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/rapidship-prune.json /out/opt/rapids
# ---- byte-identical copies (a wheel's soname "links" are copies) become relative symlinks to one; ----
# ---- then the env is moved into the layers the render planned from the lock, one runtime layer each ----
RUN --mount=type=bind,source=builder,target=/mnt/builder \
    python3.11 /tmp/builder/dedupe.py --prefix /out/opt/rapids --out /out/rapidship-dedupe.json \
 && python3.11 /mnt/builder/split_layers.py --prefix /out/opt/rapids --out /out/layers \
      --plan /mnt/builder/layer-plan.json --record /out/rapidship-layers.json

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

COPY --from=builder /out/layers/cuda/nvidia-curand-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/cuda-bindings/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-cufile-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-libnvcomp-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-cuda-runtime-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-cufft-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-cusparse-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-cublas-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-cuda-cccl-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-cuda-nvcc-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-cuda-nvrtc-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-cusolver-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-nvjitlink-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/nvidia-nccl-cu12/ /opt/rapids/
COPY --from=builder /out/layers/cuda/cuda-core/ /opt/rapids/
COPY --from=builder /out/layers/cuda/small_1/ /opt/rapids/
COPY --from=builder /out/layers/compiled/contourpy/ /opt/rapids/
COPY --from=builder /out/layers/compiled/nvtx/ /opt/rapids/
COPY --from=builder /out/layers/compiled/pyyaml/ /opt/rapids/
COPY --from=builder /out/layers/compiled/llvmlite/ /opt/rapids/
COPY --from=builder /out/layers/compiled/cupy-cuda12x/ /opt/rapids/
COPY --from=builder /out/layers/compiled/pandas/ /opt/rapids/
COPY --from=builder /out/layers/compiled/pillow/ /opt/rapids/
COPY --from=builder /out/layers/compiled/scikit-learn/ /opt/rapids/
COPY --from=builder /out/layers/compiled/numba/ /opt/rapids/
COPY --from=builder /out/layers/compiled/treelite/ /opt/rapids/
COPY --from=builder /out/layers/compiled/pyarrow/ /opt/rapids/
COPY --from=builder /out/layers/compiled/scipy/ /opt/rapids/
COPY --from=builder /out/layers/compiled/tornado/ /opt/rapids/
COPY --from=builder /out/layers/compiled/numba-cuda-mlir/ /opt/rapids/
COPY --from=builder /out/layers/compiled/numpy/ /opt/rapids/
COPY --from=builder /out/layers/compiled/numba-cuda/ /opt/rapids/
COPY --from=builder /out/layers/compiled/small_1/ /opt/rapids/
COPY --from=builder /out/layers/compiled/small_2/ /opt/rapids/
COPY --from=builder /out/layers/rapids/libnvforest-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/libucx-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/nvforest-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/cuml-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/libcuml-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/libcuvs-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/libkvikio-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/libraft-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/librmm-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/pylibraft-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/rmm-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/libcudf-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/libucxx-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/ucxx-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/cudf-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/pylibcudf-cu12/ /opt/rapids/
COPY --from=builder /out/layers/rapids/small_1/ /opt/rapids/
COPY --from=builder /out/layers/python/pygments/ /opt/rapids/
COPY --from=builder /out/layers/python/bokeh/ /opt/rapids/
COPY --from=builder /out/layers/python/dask/ /opt/rapids/
COPY --from=builder /out/layers/python/distributed/ /opt/rapids/
COPY --from=builder /out/layers/python/small_1/ /opt/rapids/
COPY --from=builder /out/layers/python/small_2/ /opt/rapids/
COPY --from=builder /out/layers/python/small_3/ /opt/rapids/
COPY --from=builder /out/layers/python/small_4/ /opt/rapids/
COPY --from=builder /out/layers/python/small_5/ /opt/rapids/
COPY --from=builder /out/layers/python/small_6/ /opt/rapids/
COPY --from=builder /out/layers/python/small_7/ /opt/rapids/
COPY --from=builder /out/layers/venv/ /opt/rapids/
COPY --from=builder /out/rapidship-layers.json /opt/rapidship/layers.json
COPY --from=builder /out/rapidship-trims.json /opt/rapidship/trims.json
COPY --from=builder /out/rapidship-prune.json /opt/rapidship/prune.json
COPY --from=builder /out/rapidship-dedupe.json /opt/rapidship/dedupe.json
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
      org.opencontainers.image.description="RAPIDS 26.10 on CUDA 12.9, debian 12, Python 3.11" \
      org.opencontainers.image.version="26.10-cuda12.9-debian12-py3.11" \
      org.opencontainers.image.vendor="rapidship" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="harbor.example.internal/dockerhub/library/debian:bookworm-slim" \
      io.rapidship.variant="cuda12-debian12" \
      io.rapidship.rapids.version="26.10" \
      io.rapidship.cuda.version="12.9" \
      io.rapidship.python.version="3.11" \
      io.rapidship.env.flavour="pip" \
      io.rapidship.gpu.archs="80,90" \
      io.rapidship.lock.sha256="0b39361e75931139be6269221fcfc29bc6f9d654d511fc07f42119aa1c1aecc1"
USER 1001:0
WORKDIR /home/rapids
ENTRYPOINT ["/usr/local/bin/rapids-entrypoint"]
CMD ["python"]
