# The pruner's newer forms on a real GPU (an sm_90 H200, no network). The machine's own CUDA 13
# libraries are copied and pruned by the builder's stage (python -m rapidship.builder.prune,
# cuobjdump-checked), to sm_90 and, for the negative case, to sm_80 only:
#   libcufft     containers in place (no-fleet ones zero-filled)
#   libcublasLt  containers with code for no listed GPU emptied (lazy and eager module loading)
#   libnccl      both sections (.nv_fatbin, then __nv_relfatbin): its one-rank reduction kernel, with
#                one section at a time made useless on sm_90 (nccl_relabel.py) so the kernel can only
#                come from the other
# forms_kernels.py runs each copy and prints sha256 per result; reports land in $OUT.
#   tree         the machine's whole CUDA 13 library tree and CuPy pruned in place to sm_90 at once
#                (as a build does, 8 jobs), then cuFFT, cuBLAS(Lt) and NCCL again, compared with
#                the originals run first (lazy and eager module loading), cuSPARSE through CuPy,
#                and prune_proof.py's cuRAND + cuBLAS hashes
# Arguments: the parts to run (fft gemm nccl tree; all by default).
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv
SITE=$(site_packages)
CUFFT=$(find "$SITE/nvidia" -name 'libcufft.so.*' -size +10M | head -1)
CUBLASLT=$(find "$SITE/nvidia" -name 'libcublasLt.so.*' -size +10M | head -1)
NCCL=$(find "$SITE/nvidia" -name 'libnccl.so.2' | head -1)
CUOBJDUMP=$(cuobjdump_path)
for f in "$CUFFT" "$CUBLASLT" "$NCCL"; do echo "$f $(stat -c %s "$f") bytes" | sed "s|$SITE|<site-packages>|"; done
PARTS=${*:-fft gemm nccl tree}
part() { [[ " $PARTS " == *" $1 "* ]]; }
export CUDA_CACHE_DISABLE=1   # a PTX fallback shows in the time instead of hiding in the JIT cache
if part fft; then
prune_copy cufft-90 90 "$CUFFT"; prune_copy cufft-80 80 "$CUFFT"
job fft-original fft; job fft-original-again fft
job fft-90 fft LD_PRELOAD=/tmp/p/cufft-90/$(basename "$CUFFT")
job fft-80-on-sm90 fft LD_PRELOAD=/tmp/p/cufft-80/$(basename "$CUFFT")
fi
if part gemm; then
prune_copy lt-90 90 "$CUBLASLT"; prune_copy lt-80 80 "$CUBLASLT"
export CUBLAS_DIR=$(dirname "$CUBLASLT")
LT=$(basename "$CUBLASLT")
job gemm-original gemm; job gemm-original-again gemm
job gemm-90 gemm LD_PRELOAD=/tmp/p/lt-90/$LT
job gemm-90-eager gemm LD_PRELOAD=/tmp/p/lt-90/$LT CUDA_MODULE_LOADING=EAGER
job gemm-80-on-sm90 gemm LD_PRELOAD=/tmp/p/lt-80/$LT
fi
if part nccl; then
prune_copy nccl-90 90 "$NCCL"; prune_copy nccl-80 80 "$NCCL"
N90=/tmp/p/nccl-90/libnccl.so.2
mkdir -p /tmp/p/n
python3 "$HERE/jobs/nccl_relabel.py" $N90 /tmp/p/n/pruned-fatbin-only.so __nv_relfatbin
python3 "$HERE/jobs/nccl_relabel.py" $N90 /tmp/p/n/pruned-relfatbin-only.so .nv_fatbin
python3 "$HERE/jobs/nccl_relabel.py" $N90 /tmp/p/n/pruned-neither.so __nv_relfatbin .nv_fatbin
python3 "$HERE/jobs/nccl_relabel.py" "$NCCL" /tmp/p/n/original-neither.so __nv_relfatbin .nv_fatbin
job nccl-original nccl NCCL_LIB="$NCCL"
job nccl-90 nccl NCCL_LIB=$N90
job nccl-90-eager nccl NCCL_LIB=$N90 CUDA_MODULE_LOADING=EAGER
job nccl-90-fatbin-only nccl NCCL_LIB=/tmp/p/n/pruned-fatbin-only.so
job nccl-90-fatbin-only-eager nccl NCCL_LIB=/tmp/p/n/pruned-fatbin-only.so CUDA_MODULE_LOADING=EAGER
job nccl-90-relfatbin-only nccl NCCL_LIB=/tmp/p/n/pruned-relfatbin-only.so
job nccl-90-neither nccl NCCL_LIB=/tmp/p/n/pruned-neither.so
job nccl-original-neither nccl NCCL_LIB=/tmp/p/n/original-neither.so
job nccl-80-on-sm90 nccl NCCL_LIB=/tmp/p/nccl-80/libnccl.so.2
fi
if part tree; then
export CUBLAS_DIR=$(dirname "$CUBLASLT")
part fft || job fft-original fft
part gemm || job gemm-original gemm
part nccl || job nccl-original nccl NCCL_LIB="$NCCL"
job sparse-original sparse
python3 "$HERE/jobs/prune_proof.py" --only cupy,info --label tree-original --out "$OUT/proof-tree-original.json" > /dev/null
cp -a "$SITE/nvidia" /tmp/nvidia-orig && cp -a "$SITE/cupy" /tmp/cupy-orig
prune_in_place --keep 90 --record "$OUT/prune-tree-90.json" "$SITE/nvidia" "$SITE/cupy" | tail -1
du -sh /tmp/nvidia-orig "$SITE/nvidia"
job fft-tree-90 fft; job gemm-tree-90 gemm; job sparse-tree-90 sparse; job nccl-tree-90 nccl NCCL_LIB="$NCCL"
# eager module loading: every registered module of every library (emptied containers too) loads first
for what in fft gemm sparse; do job $what-tree-90-eager $what CUDA_MODULE_LOADING=EAGER; done
job nccl-tree-90-eager nccl NCCL_LIB="$NCCL" CUDA_MODULE_LOADING=EAGER
python3 "$HERE/jobs/prune_proof.py" --only cupy,info --label tree-90 --out "$OUT/proof-tree-90.json" > /dev/null
echo "proof (cupy) rc=$?"
rm -rf "$SITE/nvidia" "$SITE/cupy" && mv /tmp/nvidia-orig "$SITE/nvidia" && mv /tmp/cupy-orig "$SITE/cupy"
fi
python3 "$HERE/jobs/forms_compare.py" "$OUT" | tee "$OUT/summary.json"
sed -i "s|$SITE|<site-packages>|g; s|/tmp/p/|<pruned>/|g" "$OUT"/*.json "$OUT/logs.txt"
tar czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls run-*.json) && rm "$OUT"/run-*.json   # one file back, not dozens
