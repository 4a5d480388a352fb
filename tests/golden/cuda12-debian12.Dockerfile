# Rendered by rapidship from templates/deb/Dockerfile.j2 for variant cuda12-debian12 (rapidship/rapids:26.10-cuda12.9-debian12-py3.11). Do not edit:
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
COPY lock/tools.txt /tmp/lock/tools.txt
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 -m venv /opt/installer \
 && /opt/installer/bin/pip install --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check \
      -r /tmp/lock/tools.txt
# ---- env layer cuda/nvidia-cublas-cu12 ----
FROM builder AS env-1-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-cublas-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-cublas-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-cublas-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cublas-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 1
# ---- env layer cuda/nvidia-cusolver-cu12 ----
FROM builder AS env-2-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-cusolver-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-cusolver-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-cusolver-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cusolver-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 2
# ---- env layer cuda/nvidia-cusparse-cu12 ----
FROM builder AS env-3-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-cusparse-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-cusparse-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-cusparse-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cusparse-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 3
# ---- env layer cuda/nvidia-nccl-cu12 ----
FROM builder AS env-4-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-nccl-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-nccl-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-nccl-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-nccl-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 4
# ---- env layer rapids/libcudf-cu12 ----
FROM builder AS env-5-made
ARG TARGETARCH
COPY lock/parts/rapids/libcudf-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/libcudf-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/libcudf-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libcudf-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 5
# ---- env layer cuda/nvidia-cufft-cu12 ----
FROM builder AS env-6-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-cufft-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-cufft-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-cufft-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cufft-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 6
# ---- env layer rapids/libcuvs-cu12 ----
FROM builder AS env-7-made
ARG TARGETARCH
COPY lock/parts/rapids/libcuvs-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/libcuvs-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/libcuvs-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libcuvs-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 7
# ---- env layer compiled/cupy-cuda12x ----
FROM builder AS env-8-made
ARG TARGETARCH
COPY lock/parts/compiled/cupy-cuda12x/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/cupy-cuda12x --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/cupy-cuda12x
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/cupy-cuda12x --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 8
# ---- env layer compiled/numba-cuda-mlir ----
FROM builder AS env-9-made
ARG TARGETARCH
COPY lock/parts/compiled/numba-cuda-mlir/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/numba-cuda-mlir --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/numba-cuda-mlir
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numba-cuda-mlir --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 9
# ---- env layer compiled/scipy ----
FROM builder AS env-10-made
ARG TARGETARCH
COPY lock/parts/compiled/scipy/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/scipy --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/scipy
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/scipy --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 10
# ---- env layer cuda/nvidia-cuda-nvrtc-cu12 ----
FROM builder AS env-11-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-cuda-nvrtc-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-cuda-nvrtc-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-cuda-nvrtc-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cuda-nvrtc-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 11
# ---- env layer compiled/llvmlite ----
FROM builder AS env-12-made
ARG TARGETARCH
COPY lock/parts/compiled/llvmlite/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/llvmlite --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/llvmlite
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/llvmlite --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 12
# ---- env layer compiled/pyarrow ----
FROM builder AS env-13-made
ARG TARGETARCH
COPY lock/parts/compiled/pyarrow/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/pyarrow --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/pyarrow
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/pyarrow --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 13
# ---- env layer cuda/nvidia-curand-cu12 ----
FROM builder AS env-14-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-curand-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-curand-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-curand-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-curand-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 14
# ---- env layer cuda/nvidia-cuda-nvcc-cu12 ----
FROM builder AS env-15-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-cuda-nvcc-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-cuda-nvcc-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-cuda-nvcc-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cuda-nvcc-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 15
# ---- env layer cuda/nvidia-nvjitlink-cu12 ----
FROM builder AS env-16-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-nvjitlink-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-nvjitlink-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-nvjitlink-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-nvjitlink-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 16
# ---- env layer rapids/libcuml-cu12 ----
FROM builder AS env-17-made
ARG TARGETARCH
COPY lock/parts/rapids/libcuml-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/libcuml-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/libcuml-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libcuml-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 17
# ---- env layer rapids/libnvforest-cu12 ----
FROM builder AS env-18-made
ARG TARGETARCH
COPY lock/parts/rapids/libnvforest-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/libnvforest-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/libnvforest-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libnvforest-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 18
# ---- env layer rapids/libucx-cu12 ----
FROM builder AS env-19-made
ARG TARGETARCH
COPY lock/parts/rapids/libucx-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/libucx-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/libucx-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libucx-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 19
# ---- env layer compiled/scikit-learn ----
FROM builder AS env-20-made
ARG TARGETARCH
COPY lock/parts/compiled/scikit-learn/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/scikit-learn --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/scikit-learn
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/scikit-learn --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 20
# ---- env layer cuda/nvidia-libnvcomp-cu12 ----
FROM builder AS env-21-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-libnvcomp-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-libnvcomp-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-libnvcomp-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-libnvcomp-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 21
# ---- env layer python/bokeh ----
FROM builder AS env-22-made
ARG TARGETARCH
COPY lock/parts/python/bokeh/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/python/bokeh --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/python/bokeh
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/bokeh --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 22
# ---- env layer compiled/pandas ----
FROM builder AS env-23-made
ARG TARGETARCH
COPY lock/parts/compiled/pandas/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/pandas --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/pandas
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/pandas --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 23
# ---- env layer cuda/cuda-bindings ----
FROM builder AS env-24-made
ARG TARGETARCH
COPY lock/parts/cuda/cuda-bindings/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/cuda-bindings --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/cuda-bindings
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/cuda-bindings --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 24
# ---- env layer rapids/libraft-cu12 ----
FROM builder AS env-25-made
ARG TARGETARCH
COPY lock/parts/rapids/libraft-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/libraft-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/libraft-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libraft-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 25
# ---- env layer compiled/numpy ----
FROM builder AS env-26-made
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
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/numpy
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numpy --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 26
# ---- env layer compiled/pillow ----
FROM builder AS env-27-made
ARG TARGETARCH
COPY lock/parts/compiled/pillow/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/pillow --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/pillow
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/pillow --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 27
# ---- env layer rapids/cuml-cu12 ----
FROM builder AS env-28-made
ARG TARGETARCH
COPY lock/parts/rapids/cuml-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/cuml-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/cuml-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/cuml-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 28
# ---- env layer rapids/pylibcudf-cu12 ----
FROM builder AS env-29-made
ARG TARGETARCH
COPY lock/parts/rapids/pylibcudf-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/pylibcudf-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/pylibcudf-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/pylibcudf-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 29
# ---- env layer compiled/numba ----
FROM builder AS env-30-made
ARG TARGETARCH
COPY lock/parts/compiled/numba/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/numba --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/numba
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numba --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 30
# ---- env layer compiled/nvtx ----
FROM builder AS env-31-made
ARG TARGETARCH
COPY lock/parts/compiled/nvtx/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/nvtx --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/nvtx
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/nvtx --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 31
# ---- env layer cuda/nvidia-cuda-cccl-cu12 ----
FROM builder AS env-32-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-cuda-cccl-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-cuda-cccl-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-cuda-cccl-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cuda-cccl-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 32
# ---- env layer rapids/librmm-cu12 ----
FROM builder AS env-33-made
ARG TARGETARCH
COPY lock/parts/rapids/librmm-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/librmm-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/librmm-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/librmm-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 33
# ---- env layer compiled/numba-cuda ----
FROM builder AS env-34-made
ARG TARGETARCH
COPY lock/parts/compiled/numba-cuda/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/numba-cuda --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/numba-cuda
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numba-cuda --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 34
# ---- env layer cuda/cuda-core ----
FROM builder AS env-35-made
ARG TARGETARCH
COPY lock/parts/cuda/cuda-core/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/cuda-core --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/cuda-core
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/cuda-core --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 35
# ---- env layer cuda/nvidia-cuda-runtime-cu12 ----
FROM builder AS env-36-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-cuda-runtime-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-cuda-runtime-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-cuda-runtime-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cuda-runtime-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 36
# ---- env layer rapids/libucxx-cu12 ----
FROM builder AS env-37-made
ARG TARGETARCH
COPY lock/parts/rapids/libucxx-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/libucxx-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/libucxx-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libucxx-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 37
# ---- env layer compiled/small_2 ----
FROM builder AS env-38-made
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
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/small_2
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_2 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 38
# ---- env layer compiled/contourpy ----
FROM builder AS env-39-made
ARG TARGETARCH
COPY lock/parts/compiled/contourpy/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/contourpy --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/contourpy
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/contourpy --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 39
# ---- env layer rapids/libkvikio-cu12 ----
FROM builder AS env-40-made
ARG TARGETARCH
COPY lock/parts/rapids/libkvikio-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/libkvikio-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/libkvikio-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libkvikio-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 40
# ---- env layer cuda/nvidia-cufile-cu12 ----
FROM builder AS env-41-made
ARG TARGETARCH
COPY lock/parts/cuda/nvidia-cufile-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/nvidia-cufile-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/nvidia-cufile-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cufile-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 41
# ---- env layer rapids/cudf-cu12 ----
FROM builder AS env-42-made
ARG TARGETARCH
COPY lock/parts/rapids/cudf-cu12/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/cudf-cu12 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/cudf-cu12
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/cudf-cu12 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 42
# ---- env layer rapids/small_4 ----
FROM builder AS env-43-made
ARG TARGETARCH
COPY lock/parts/rapids/small_4/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/small_4 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/small_4
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_4 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 43
# ---- env layer compiled/small_1 ----
FROM builder AS env-44-made
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
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/small_1
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_1 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 44
# ---- env layer compiled/small_3 ----
FROM builder AS env-45-made
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
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/small_3
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_3 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 45
# ---- env layer compiled/small_4 ----
FROM builder AS env-46-made
ARG TARGETARCH
COPY lock/parts/compiled/small_4/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/compiled/small_4 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/compiled/small_4
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_4 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 46
# ---- env layer python/dask ----
FROM builder AS env-47-made
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
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/python/dask
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/dask --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 47
# ---- env layer python/pygments ----
FROM builder AS env-48-made
ARG TARGETARCH
COPY lock/parts/python/pygments/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/python/pygments --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/python/pygments
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/pygments --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 48
# ---- env layer rapids/small_2 ----
FROM builder AS env-49-made
ARG TARGETARCH
COPY lock/parts/rapids/small_2/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/small_2 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/small_2
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_2 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 49
# ---- env layer python/small_5 ----
FROM builder AS env-50-made
ARG TARGETARCH
COPY lock/parts/python/small_5/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/python/small_5 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/python/small_5
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_5 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 50
# ---- env layer rapids/small_5 ----
FROM builder AS env-51-made
ARG TARGETARCH
COPY lock/parts/rapids/small_5/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/small_5 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/small_5
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_5 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 51
# ---- env layer python/distributed ----
FROM builder AS env-52-made
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
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/python/distributed
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/distributed --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 52
# ---- env layer rapids/small_1 ----
FROM builder AS env-53-made
ARG TARGETARCH
COPY lock/parts/rapids/small_1/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/small_1 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/small_1
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_1 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 53
# ---- env layer cuda/small_1 ----
FROM builder AS env-54-made
ARG TARGETARCH
COPY lock/parts/cuda/small_1/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/cuda/small_1 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/cuda/small_1
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/small_1 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 54
# ---- env layer python/small_4 ----
FROM builder AS env-55-made
ARG TARGETARCH
COPY lock/parts/python/small_4/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/python/small_4 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/python/small_4
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_4 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 55
# ---- env layer rapids/small_3 ----
FROM builder AS env-56-made
ARG TARGETARCH
COPY lock/parts/rapids/small_3/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/rapids/small_3 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/rapids/small_3
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_3 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 56
# ---- env layer python/small_1 ----
FROM builder AS env-57-made
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
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/python/small_1
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_1 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 57
# ---- env layer python/small_2 ----
FROM builder AS env-58-made
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
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/python/small_2
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_2 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 58
# ---- env layer python/small_3 ----
FROM builder AS env-59-made
ARG TARGETARCH
COPY lock/parts/python/small_3/ /tmp/part/
RUN --mount=type=secret,id=cacert,required=false \
    --mount=type=secret,id=pip-index,required=false \
    --mount=type=secret,id=pipconf,target=/etc/pip.conf,required=false \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \
 && if [ -s /run/secrets/pip-index ]; then PIP_INDEX_URL="$(cat /run/secrets/pip-index)"; export PIP_INDEX_URL; fi \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/python/small_3 --records /out/records \
      --trims /tmp/builder/trims.json --lock "/tmp/part/requirements-${TARGETARCH}.txt" --arch "${TARGETARCH}" \
      --python-version 3.11 --glibc-minor 36
# device code pruned to gpu_archs 80,90: each rewritten library proven against its original and
# listed by NVIDIA's cuobjdump; a file that cannot be proven is left whole
COPY builder/prune/ /tmp/builder/prune/
RUN PYTHONPATH=/tmp/builder /opt/installer/bin/python -m prune --keep 80,90 \
      --cuobjdump "$(echo /opt/installer/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump)" \
      --record /out/records/prune.json /out/layers/python/small_3
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_3 --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 59
# ---- env layer venv ----
FROM builder AS env-60-made
ARG TARGETARCH
RUN /opt/rapids/bin/python -m pip uninstall -y --disable-pip-version-check setuptools pip \
 && mkdir -p /out/layers/venv && cp -a /opt/rapids/. /out/layers/venv/ \
 && python3.11 /tmp/builder/install_layer.py --prefix /opt/rapids --out /out/layers/venv --records /out/records \
      --trims /tmp/builder/trims.json
RUN --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/venv --out /out/records/dedupe.json \
      --index /out/records/big.json --layer 60
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
    --mount=type=bind,from=env-10-made,source=/out/records,target=/parts/10 \
    --mount=type=bind,from=env-11-made,source=/out/records,target=/parts/11 \
    --mount=type=bind,from=env-12-made,source=/out/records,target=/parts/12 \
    --mount=type=bind,from=env-13-made,source=/out/records,target=/parts/13 \
    --mount=type=bind,from=env-14-made,source=/out/records,target=/parts/14 \
    --mount=type=bind,from=env-15-made,source=/out/records,target=/parts/15 \
    --mount=type=bind,from=env-16-made,source=/out/records,target=/parts/16 \
    --mount=type=bind,from=env-17-made,source=/out/records,target=/parts/17 \
    --mount=type=bind,from=env-18-made,source=/out/records,target=/parts/18 \
    --mount=type=bind,from=env-19-made,source=/out/records,target=/parts/19 \
    --mount=type=bind,from=env-20-made,source=/out/records,target=/parts/20 \
    --mount=type=bind,from=env-21-made,source=/out/records,target=/parts/21 \
    --mount=type=bind,from=env-22-made,source=/out/records,target=/parts/22 \
    --mount=type=bind,from=env-23-made,source=/out/records,target=/parts/23 \
    --mount=type=bind,from=env-24-made,source=/out/records,target=/parts/24 \
    --mount=type=bind,from=env-25-made,source=/out/records,target=/parts/25 \
    --mount=type=bind,from=env-26-made,source=/out/records,target=/parts/26 \
    --mount=type=bind,from=env-27-made,source=/out/records,target=/parts/27 \
    --mount=type=bind,from=env-28-made,source=/out/records,target=/parts/28 \
    --mount=type=bind,from=env-29-made,source=/out/records,target=/parts/29 \
    --mount=type=bind,from=env-30-made,source=/out/records,target=/parts/30 \
    --mount=type=bind,from=env-31-made,source=/out/records,target=/parts/31 \
    --mount=type=bind,from=env-32-made,source=/out/records,target=/parts/32 \
    --mount=type=bind,from=env-33-made,source=/out/records,target=/parts/33 \
    --mount=type=bind,from=env-34-made,source=/out/records,target=/parts/34 \
    --mount=type=bind,from=env-35-made,source=/out/records,target=/parts/35 \
    --mount=type=bind,from=env-36-made,source=/out/records,target=/parts/36 \
    --mount=type=bind,from=env-37-made,source=/out/records,target=/parts/37 \
    --mount=type=bind,from=env-38-made,source=/out/records,target=/parts/38 \
    --mount=type=bind,from=env-39-made,source=/out/records,target=/parts/39 \
    --mount=type=bind,from=env-40-made,source=/out/records,target=/parts/40 \
    --mount=type=bind,from=env-41-made,source=/out/records,target=/parts/41 \
    --mount=type=bind,from=env-42-made,source=/out/records,target=/parts/42 \
    --mount=type=bind,from=env-43-made,source=/out/records,target=/parts/43 \
    --mount=type=bind,from=env-44-made,source=/out/records,target=/parts/44 \
    --mount=type=bind,from=env-45-made,source=/out/records,target=/parts/45 \
    --mount=type=bind,from=env-46-made,source=/out/records,target=/parts/46 \
    --mount=type=bind,from=env-47-made,source=/out/records,target=/parts/47 \
    --mount=type=bind,from=env-48-made,source=/out/records,target=/parts/48 \
    --mount=type=bind,from=env-49-made,source=/out/records,target=/parts/49 \
    --mount=type=bind,from=env-50-made,source=/out/records,target=/parts/50 \
    --mount=type=bind,from=env-51-made,source=/out/records,target=/parts/51 \
    --mount=type=bind,from=env-52-made,source=/out/records,target=/parts/52 \
    --mount=type=bind,from=env-53-made,source=/out/records,target=/parts/53 \
    --mount=type=bind,from=env-54-made,source=/out/records,target=/parts/54 \
    --mount=type=bind,from=env-55-made,source=/out/records,target=/parts/55 \
    --mount=type=bind,from=env-56-made,source=/out/records,target=/parts/56 \
    --mount=type=bind,from=env-57-made,source=/out/records,target=/parts/57 \
    --mount=type=bind,from=env-58-made,source=/out/records,target=/parts/58 \
    --mount=type=bind,from=env-59-made,source=/out/records,target=/parts/59 \
    --mount=type=bind,from=env-60-made,source=/out/records,target=/parts/60 \
    python3.11 /mnt/dedupe.py --plan-links /parts/*/big.json --out /out/links
FROM env-1-made AS env-1
RUN --mount=type=bind,from=env-index,source=/out/links/1.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cublas-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-cublas-cu12 --layer cuda/nvidia-cublas-cu12 --out /out/records/layer.json
FROM env-2-made AS env-2
RUN --mount=type=bind,from=env-index,source=/out/links/2.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cusolver-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-cusolver-cu12 --layer cuda/nvidia-cusolver-cu12 --out /out/records/layer.json
FROM env-3-made AS env-3
RUN --mount=type=bind,from=env-index,source=/out/links/3.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cusparse-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-cusparse-cu12 --layer cuda/nvidia-cusparse-cu12 --out /out/records/layer.json
FROM env-4-made AS env-4
RUN --mount=type=bind,from=env-index,source=/out/links/4.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-nccl-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-nccl-cu12 --layer cuda/nvidia-nccl-cu12 --out /out/records/layer.json
FROM env-5-made AS env-5
RUN --mount=type=bind,from=env-index,source=/out/links/5.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libcudf-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/libcudf-cu12 --layer rapids/libcudf-cu12 --out /out/records/layer.json
FROM env-6-made AS env-6
RUN --mount=type=bind,from=env-index,source=/out/links/6.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cufft-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-cufft-cu12 --layer cuda/nvidia-cufft-cu12 --out /out/records/layer.json
FROM env-7-made AS env-7
RUN --mount=type=bind,from=env-index,source=/out/links/7.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libcuvs-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/libcuvs-cu12 --layer rapids/libcuvs-cu12 --out /out/records/layer.json
FROM env-8-made AS env-8
RUN --mount=type=bind,from=env-index,source=/out/links/8.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/cupy-cuda12x --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/cupy-cuda12x --layer compiled/cupy-cuda12x --out /out/records/layer.json
FROM env-9-made AS env-9
RUN --mount=type=bind,from=env-index,source=/out/links/9.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numba-cuda-mlir --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/numba-cuda-mlir --layer compiled/numba-cuda-mlir --out /out/records/layer.json
FROM env-10-made AS env-10
RUN --mount=type=bind,from=env-index,source=/out/links/10.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/scipy --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/scipy --layer compiled/scipy --out /out/records/layer.json
FROM env-11-made AS env-11
RUN --mount=type=bind,from=env-index,source=/out/links/11.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cuda-nvrtc-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-cuda-nvrtc-cu12 --layer cuda/nvidia-cuda-nvrtc-cu12 --out /out/records/layer.json
FROM env-12-made AS env-12
RUN --mount=type=bind,from=env-index,source=/out/links/12.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/llvmlite --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/llvmlite --layer compiled/llvmlite --out /out/records/layer.json
FROM env-13-made AS env-13
RUN --mount=type=bind,from=env-index,source=/out/links/13.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/pyarrow --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/pyarrow --layer compiled/pyarrow --out /out/records/layer.json
FROM env-14-made AS env-14
RUN --mount=type=bind,from=env-index,source=/out/links/14.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-curand-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-curand-cu12 --layer cuda/nvidia-curand-cu12 --out /out/records/layer.json
FROM env-15-made AS env-15
RUN --mount=type=bind,from=env-index,source=/out/links/15.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cuda-nvcc-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-cuda-nvcc-cu12 --layer cuda/nvidia-cuda-nvcc-cu12 --out /out/records/layer.json
FROM env-16-made AS env-16
RUN --mount=type=bind,from=env-index,source=/out/links/16.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-nvjitlink-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-nvjitlink-cu12 --layer cuda/nvidia-nvjitlink-cu12 --out /out/records/layer.json
FROM env-17-made AS env-17
RUN --mount=type=bind,from=env-index,source=/out/links/17.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libcuml-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/libcuml-cu12 --layer rapids/libcuml-cu12 --out /out/records/layer.json
FROM env-18-made AS env-18
RUN --mount=type=bind,from=env-index,source=/out/links/18.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libnvforest-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/libnvforest-cu12 --layer rapids/libnvforest-cu12 --out /out/records/layer.json
FROM env-19-made AS env-19
RUN --mount=type=bind,from=env-index,source=/out/links/19.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libucx-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/libucx-cu12 --layer rapids/libucx-cu12 --out /out/records/layer.json
FROM env-20-made AS env-20
RUN --mount=type=bind,from=env-index,source=/out/links/20.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/scikit-learn --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/scikit-learn --layer compiled/scikit-learn --out /out/records/layer.json
FROM env-21-made AS env-21
RUN --mount=type=bind,from=env-index,source=/out/links/21.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-libnvcomp-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-libnvcomp-cu12 --layer cuda/nvidia-libnvcomp-cu12 --out /out/records/layer.json
FROM env-22-made AS env-22
RUN --mount=type=bind,from=env-index,source=/out/links/22.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/bokeh --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/bokeh --layer python/bokeh --out /out/records/layer.json
FROM env-23-made AS env-23
RUN --mount=type=bind,from=env-index,source=/out/links/23.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/pandas --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/pandas --layer compiled/pandas --out /out/records/layer.json
FROM env-24-made AS env-24
RUN --mount=type=bind,from=env-index,source=/out/links/24.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/cuda-bindings --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/cuda-bindings --layer cuda/cuda-bindings --out /out/records/layer.json
FROM env-25-made AS env-25
RUN --mount=type=bind,from=env-index,source=/out/links/25.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libraft-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/libraft-cu12 --layer rapids/libraft-cu12 --out /out/records/layer.json
FROM env-26-made AS env-26
RUN --mount=type=bind,from=env-index,source=/out/links/26.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numpy --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/numpy --layer compiled/numpy --out /out/records/layer.json
FROM env-27-made AS env-27
RUN --mount=type=bind,from=env-index,source=/out/links/27.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/pillow --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/pillow --layer compiled/pillow --out /out/records/layer.json
FROM env-28-made AS env-28
RUN --mount=type=bind,from=env-index,source=/out/links/28.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/cuml-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/cuml-cu12 --layer rapids/cuml-cu12 --out /out/records/layer.json
FROM env-29-made AS env-29
RUN --mount=type=bind,from=env-index,source=/out/links/29.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/pylibcudf-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/pylibcudf-cu12 --layer rapids/pylibcudf-cu12 --out /out/records/layer.json
FROM env-30-made AS env-30
RUN --mount=type=bind,from=env-index,source=/out/links/30.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numba --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/numba --layer compiled/numba --out /out/records/layer.json
FROM env-31-made AS env-31
RUN --mount=type=bind,from=env-index,source=/out/links/31.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/nvtx --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/nvtx --layer compiled/nvtx --out /out/records/layer.json
FROM env-32-made AS env-32
RUN --mount=type=bind,from=env-index,source=/out/links/32.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cuda-cccl-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-cuda-cccl-cu12 --layer cuda/nvidia-cuda-cccl-cu12 --out /out/records/layer.json
FROM env-33-made AS env-33
RUN --mount=type=bind,from=env-index,source=/out/links/33.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/librmm-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/librmm-cu12 --layer rapids/librmm-cu12 --out /out/records/layer.json
FROM env-34-made AS env-34
RUN --mount=type=bind,from=env-index,source=/out/links/34.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/numba-cuda --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/numba-cuda --layer compiled/numba-cuda --out /out/records/layer.json
FROM env-35-made AS env-35
RUN --mount=type=bind,from=env-index,source=/out/links/35.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/cuda-core --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/cuda-core --layer cuda/cuda-core --out /out/records/layer.json
FROM env-36-made AS env-36
RUN --mount=type=bind,from=env-index,source=/out/links/36.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cuda-runtime-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-cuda-runtime-cu12 --layer cuda/nvidia-cuda-runtime-cu12 --out /out/records/layer.json
FROM env-37-made AS env-37
RUN --mount=type=bind,from=env-index,source=/out/links/37.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libucxx-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/libucxx-cu12 --layer rapids/libucxx-cu12 --out /out/records/layer.json
FROM env-38-made AS env-38
RUN --mount=type=bind,from=env-index,source=/out/links/38.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_2 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/small_2 --layer compiled/small_2 --out /out/records/layer.json
FROM env-39-made AS env-39
RUN --mount=type=bind,from=env-index,source=/out/links/39.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/contourpy --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/contourpy --layer compiled/contourpy --out /out/records/layer.json
FROM env-40-made AS env-40
RUN --mount=type=bind,from=env-index,source=/out/links/40.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/libkvikio-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/libkvikio-cu12 --layer rapids/libkvikio-cu12 --out /out/records/layer.json
FROM env-41-made AS env-41
RUN --mount=type=bind,from=env-index,source=/out/links/41.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/nvidia-cufile-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/nvidia-cufile-cu12 --layer cuda/nvidia-cufile-cu12 --out /out/records/layer.json
FROM env-42-made AS env-42
RUN --mount=type=bind,from=env-index,source=/out/links/42.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/cudf-cu12 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/cudf-cu12 --layer rapids/cudf-cu12 --out /out/records/layer.json
FROM env-43-made AS env-43
RUN --mount=type=bind,from=env-index,source=/out/links/43.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_4 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/small_4 --layer rapids/small_4 --out /out/records/layer.json
FROM env-44-made AS env-44
RUN --mount=type=bind,from=env-index,source=/out/links/44.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_1 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/small_1 --layer compiled/small_1 --out /out/records/layer.json
FROM env-45-made AS env-45
RUN --mount=type=bind,from=env-index,source=/out/links/45.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_3 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/small_3 --layer compiled/small_3 --out /out/records/layer.json
FROM env-46-made AS env-46
RUN --mount=type=bind,from=env-index,source=/out/links/46.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/compiled/small_4 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/compiled/small_4 --layer compiled/small_4 --out /out/records/layer.json
FROM env-47-made AS env-47
RUN --mount=type=bind,from=env-index,source=/out/links/47.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/dask --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/dask --layer python/dask --out /out/records/layer.json
FROM env-48-made AS env-48
RUN --mount=type=bind,from=env-index,source=/out/links/48.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/pygments --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/pygments --layer python/pygments --out /out/records/layer.json
FROM env-49-made AS env-49
RUN --mount=type=bind,from=env-index,source=/out/links/49.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_2 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/small_2 --layer rapids/small_2 --out /out/records/layer.json
FROM env-50-made AS env-50
RUN --mount=type=bind,from=env-index,source=/out/links/50.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_5 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/small_5 --layer python/small_5 --out /out/records/layer.json
FROM env-51-made AS env-51
RUN --mount=type=bind,from=env-index,source=/out/links/51.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_5 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/small_5 --layer rapids/small_5 --out /out/records/layer.json
FROM env-52-made AS env-52
RUN --mount=type=bind,from=env-index,source=/out/links/52.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/distributed --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/distributed --layer python/distributed --out /out/records/layer.json
FROM env-53-made AS env-53
RUN --mount=type=bind,from=env-index,source=/out/links/53.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_1 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/small_1 --layer rapids/small_1 --out /out/records/layer.json
FROM env-54-made AS env-54
RUN --mount=type=bind,from=env-index,source=/out/links/54.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/cuda/small_1 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/cuda/small_1 --layer cuda/small_1 --out /out/records/layer.json
FROM env-55-made AS env-55
RUN --mount=type=bind,from=env-index,source=/out/links/55.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_4 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/small_4 --layer python/small_4 --out /out/records/layer.json
FROM env-56-made AS env-56
RUN --mount=type=bind,from=env-index,source=/out/links/56.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/rapids/small_3 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/rapids/small_3 --layer rapids/small_3 --out /out/records/layer.json
FROM env-57-made AS env-57
RUN --mount=type=bind,from=env-index,source=/out/links/57.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_1 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/small_1 --layer python/small_1 --out /out/records/layer.json
FROM env-58-made AS env-58
RUN --mount=type=bind,from=env-index,source=/out/links/58.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_2 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/small_2 --layer python/small_2 --out /out/records/layer.json
FROM env-59-made AS env-59
RUN --mount=type=bind,from=env-index,source=/out/links/59.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/python/small_3 --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/python/small_3 --layer python/small_3 --out /out/records/layer.json
FROM env-60-made AS env-60
RUN --mount=type=bind,from=env-index,source=/out/links/60.json,target=/mnt/links.json \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    python3.11 /mnt/dedupe.py --prefix /out/layers/venv --links /mnt/links.json --out /out/records/dedupe.json \
 && python3.11 /mnt/layer_record.py measure --prefix /out/layers/venv --layer venv --out /out/records/layer.json
# ---- the env's records, from every layer's ----
FROM builder AS env-records
RUN --mount=type=bind,source=builder/layer-plan.json,target=/mnt/layer-plan.json \
    --mount=type=bind,source=builder/layer_record.py,target=/mnt/layer_record.py \
    --mount=type=bind,source=builder/dedupe.py,target=/mnt/dedupe.py \
    --mount=type=bind,source=builder/prune,target=/mnt/prune \
    --mount=type=bind,from=env-1,source=/out/records,target=/parts/1 \
    --mount=type=bind,from=env-2,source=/out/records,target=/parts/2 \
    --mount=type=bind,from=env-3,source=/out/records,target=/parts/3 \
    --mount=type=bind,from=env-4,source=/out/records,target=/parts/4 \
    --mount=type=bind,from=env-5,source=/out/records,target=/parts/5 \
    --mount=type=bind,from=env-6,source=/out/records,target=/parts/6 \
    --mount=type=bind,from=env-7,source=/out/records,target=/parts/7 \
    --mount=type=bind,from=env-8,source=/out/records,target=/parts/8 \
    --mount=type=bind,from=env-9,source=/out/records,target=/parts/9 \
    --mount=type=bind,from=env-10,source=/out/records,target=/parts/10 \
    --mount=type=bind,from=env-11,source=/out/records,target=/parts/11 \
    --mount=type=bind,from=env-12,source=/out/records,target=/parts/12 \
    --mount=type=bind,from=env-13,source=/out/records,target=/parts/13 \
    --mount=type=bind,from=env-14,source=/out/records,target=/parts/14 \
    --mount=type=bind,from=env-15,source=/out/records,target=/parts/15 \
    --mount=type=bind,from=env-16,source=/out/records,target=/parts/16 \
    --mount=type=bind,from=env-17,source=/out/records,target=/parts/17 \
    --mount=type=bind,from=env-18,source=/out/records,target=/parts/18 \
    --mount=type=bind,from=env-19,source=/out/records,target=/parts/19 \
    --mount=type=bind,from=env-20,source=/out/records,target=/parts/20 \
    --mount=type=bind,from=env-21,source=/out/records,target=/parts/21 \
    --mount=type=bind,from=env-22,source=/out/records,target=/parts/22 \
    --mount=type=bind,from=env-23,source=/out/records,target=/parts/23 \
    --mount=type=bind,from=env-24,source=/out/records,target=/parts/24 \
    --mount=type=bind,from=env-25,source=/out/records,target=/parts/25 \
    --mount=type=bind,from=env-26,source=/out/records,target=/parts/26 \
    --mount=type=bind,from=env-27,source=/out/records,target=/parts/27 \
    --mount=type=bind,from=env-28,source=/out/records,target=/parts/28 \
    --mount=type=bind,from=env-29,source=/out/records,target=/parts/29 \
    --mount=type=bind,from=env-30,source=/out/records,target=/parts/30 \
    --mount=type=bind,from=env-31,source=/out/records,target=/parts/31 \
    --mount=type=bind,from=env-32,source=/out/records,target=/parts/32 \
    --mount=type=bind,from=env-33,source=/out/records,target=/parts/33 \
    --mount=type=bind,from=env-34,source=/out/records,target=/parts/34 \
    --mount=type=bind,from=env-35,source=/out/records,target=/parts/35 \
    --mount=type=bind,from=env-36,source=/out/records,target=/parts/36 \
    --mount=type=bind,from=env-37,source=/out/records,target=/parts/37 \
    --mount=type=bind,from=env-38,source=/out/records,target=/parts/38 \
    --mount=type=bind,from=env-39,source=/out/records,target=/parts/39 \
    --mount=type=bind,from=env-40,source=/out/records,target=/parts/40 \
    --mount=type=bind,from=env-41,source=/out/records,target=/parts/41 \
    --mount=type=bind,from=env-42,source=/out/records,target=/parts/42 \
    --mount=type=bind,from=env-43,source=/out/records,target=/parts/43 \
    --mount=type=bind,from=env-44,source=/out/records,target=/parts/44 \
    --mount=type=bind,from=env-45,source=/out/records,target=/parts/45 \
    --mount=type=bind,from=env-46,source=/out/records,target=/parts/46 \
    --mount=type=bind,from=env-47,source=/out/records,target=/parts/47 \
    --mount=type=bind,from=env-48,source=/out/records,target=/parts/48 \
    --mount=type=bind,from=env-49,source=/out/records,target=/parts/49 \
    --mount=type=bind,from=env-50,source=/out/records,target=/parts/50 \
    --mount=type=bind,from=env-51,source=/out/records,target=/parts/51 \
    --mount=type=bind,from=env-52,source=/out/records,target=/parts/52 \
    --mount=type=bind,from=env-53,source=/out/records,target=/parts/53 \
    --mount=type=bind,from=env-54,source=/out/records,target=/parts/54 \
    --mount=type=bind,from=env-55,source=/out/records,target=/parts/55 \
    --mount=type=bind,from=env-56,source=/out/records,target=/parts/56 \
    --mount=type=bind,from=env-57,source=/out/records,target=/parts/57 \
    --mount=type=bind,from=env-58,source=/out/records,target=/parts/58 \
    --mount=type=bind,from=env-59,source=/out/records,target=/parts/59 \
    --mount=type=bind,from=env-60,source=/out/records,target=/parts/60 \
    mkdir -p /out/records \
 && python3.11 /mnt/layer_record.py merge --plan /mnt/layer-plan.json --out /out/records/layers.json /parts/* \
 && python3.11 /tmp/builder/measure_trims.py --merge /parts/*/trims.json --out /out/records/trims.json \
 && python3.11 /mnt/dedupe.py --merge /parts/*/dedupe.json --out /out/records/dedupe.json \
 && PYTHONPATH=/mnt python3.11 -m prune.merge --record /out/records/prune.json /parts/*/prune.json

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

COPY --from=env-1 /out/layers/cuda/nvidia-cublas-cu12/ /opt/rapids/
COPY --from=env-2 /out/layers/cuda/nvidia-cusolver-cu12/ /opt/rapids/
COPY --from=env-3 /out/layers/cuda/nvidia-cusparse-cu12/ /opt/rapids/
COPY --from=env-4 /out/layers/cuda/nvidia-nccl-cu12/ /opt/rapids/
COPY --from=env-5 /out/layers/rapids/libcudf-cu12/ /opt/rapids/
COPY --from=env-6 /out/layers/cuda/nvidia-cufft-cu12/ /opt/rapids/
COPY --from=env-7 /out/layers/rapids/libcuvs-cu12/ /opt/rapids/
COPY --from=env-8 /out/layers/compiled/cupy-cuda12x/ /opt/rapids/
COPY --from=env-9 /out/layers/compiled/numba-cuda-mlir/ /opt/rapids/
COPY --from=env-10 /out/layers/compiled/scipy/ /opt/rapids/
COPY --from=env-11 /out/layers/cuda/nvidia-cuda-nvrtc-cu12/ /opt/rapids/
COPY --from=env-12 /out/layers/compiled/llvmlite/ /opt/rapids/
COPY --from=env-13 /out/layers/compiled/pyarrow/ /opt/rapids/
COPY --from=env-14 /out/layers/cuda/nvidia-curand-cu12/ /opt/rapids/
COPY --from=env-15 /out/layers/cuda/nvidia-cuda-nvcc-cu12/ /opt/rapids/
COPY --from=env-16 /out/layers/cuda/nvidia-nvjitlink-cu12/ /opt/rapids/
COPY --from=env-17 /out/layers/rapids/libcuml-cu12/ /opt/rapids/
COPY --from=env-18 /out/layers/rapids/libnvforest-cu12/ /opt/rapids/
COPY --from=env-19 /out/layers/rapids/libucx-cu12/ /opt/rapids/
COPY --from=env-20 /out/layers/compiled/scikit-learn/ /opt/rapids/
COPY --from=env-21 /out/layers/cuda/nvidia-libnvcomp-cu12/ /opt/rapids/
COPY --from=env-22 /out/layers/python/bokeh/ /opt/rapids/
COPY --from=env-23 /out/layers/compiled/pandas/ /opt/rapids/
COPY --from=env-24 /out/layers/cuda/cuda-bindings/ /opt/rapids/
COPY --from=env-25 /out/layers/rapids/libraft-cu12/ /opt/rapids/
COPY --from=env-26 /out/layers/compiled/numpy/ /opt/rapids/
COPY --from=env-27 /out/layers/compiled/pillow/ /opt/rapids/
COPY --from=env-28 /out/layers/rapids/cuml-cu12/ /opt/rapids/
COPY --from=env-29 /out/layers/rapids/pylibcudf-cu12/ /opt/rapids/
COPY --from=env-30 /out/layers/compiled/numba/ /opt/rapids/
COPY --from=env-31 /out/layers/compiled/nvtx/ /opt/rapids/
COPY --from=env-32 /out/layers/cuda/nvidia-cuda-cccl-cu12/ /opt/rapids/
COPY --from=env-33 /out/layers/rapids/librmm-cu12/ /opt/rapids/
COPY --from=env-34 /out/layers/compiled/numba-cuda/ /opt/rapids/
COPY --from=env-35 /out/layers/cuda/cuda-core/ /opt/rapids/
COPY --from=env-36 /out/layers/cuda/nvidia-cuda-runtime-cu12/ /opt/rapids/
COPY --from=env-37 /out/layers/rapids/libucxx-cu12/ /opt/rapids/
COPY --from=env-38 /out/layers/compiled/small_2/ /opt/rapids/
COPY --from=env-39 /out/layers/compiled/contourpy/ /opt/rapids/
COPY --from=env-40 /out/layers/rapids/libkvikio-cu12/ /opt/rapids/
COPY --from=env-41 /out/layers/cuda/nvidia-cufile-cu12/ /opt/rapids/
COPY --from=env-42 /out/layers/rapids/cudf-cu12/ /opt/rapids/
COPY --from=env-43 /out/layers/rapids/small_4/ /opt/rapids/
COPY --from=env-44 /out/layers/compiled/small_1/ /opt/rapids/
COPY --from=env-45 /out/layers/compiled/small_3/ /opt/rapids/
COPY --from=env-46 /out/layers/compiled/small_4/ /opt/rapids/
COPY --from=env-47 /out/layers/python/dask/ /opt/rapids/
COPY --from=env-48 /out/layers/python/pygments/ /opt/rapids/
COPY --from=env-49 /out/layers/rapids/small_2/ /opt/rapids/
COPY --from=env-50 /out/layers/python/small_5/ /opt/rapids/
COPY --from=env-51 /out/layers/rapids/small_5/ /opt/rapids/
COPY --from=env-52 /out/layers/python/distributed/ /opt/rapids/
COPY --from=env-53 /out/layers/rapids/small_1/ /opt/rapids/
COPY --from=env-54 /out/layers/cuda/small_1/ /opt/rapids/
COPY --from=env-55 /out/layers/python/small_4/ /opt/rapids/
COPY --from=env-56 /out/layers/rapids/small_3/ /opt/rapids/
COPY --from=env-57 /out/layers/python/small_1/ /opt/rapids/
COPY --from=env-58 /out/layers/python/small_2/ /opt/rapids/
COPY --from=env-59 /out/layers/python/small_3/ /opt/rapids/
COPY --from=env-60 /out/layers/venv/ /opt/rapids/
COPY --from=env-records /out/records/ /opt/rapidship/
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
