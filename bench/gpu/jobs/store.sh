# cuBLASLt's own kernel store (.cask_resource, containers it finds by address) pruned in place after
# its .nv_fatbin, on a real GPU (an sm_90 H200, no network). The machine's own CUDA 13 libcublasLt is
# copied and pruned by the builder's stage (python -m rapidship.builder.prune, cuobjdump-checked) to
# the fleet [80, 90], to [90], and, for the negative case, to [80] only; forms_kernels.py gemm runs
# each copy (fp32, fp16, bf16 through cublasLt and cuBLAS; tf32, fp8 e4m3, epilogues, strided
# batches through cublasLt; lazy and eager module loading) and forms_compare.py compares every
# result with the original's, bit for bit. census.json: what the store holds, before and after.
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv
SITE=$(site_packages)
CUBLASLT=$(find "$SITE/nvidia" -name 'libcublasLt.so.*' -size +10M | head -1)
CUOBJDUMP=$(cuobjdump_path)
echo "$CUBLASLT $(stat -c %s "$CUBLASLT") bytes" | sed "s|$SITE|<site-packages>|"
export CUDA_CACHE_DISABLE=1   # a PTX fallback shows in the time instead of hiding in the JIT cache
prune_copy lt-8090 80,90 "$CUBLASLT"; prune_copy lt-90 90 "$CUBLASLT"; prune_copy lt-80 80 "$CUBLASLT"
LT=$(basename "$CUBLASLT")
PYTHONPATH=$R/src python3 - "$CUBLASLT" /tmp/p/lt-8090/$LT /tmp/p/lt-90/$LT /tmp/p/lt-80/$LT > "$OUT/census.json" <<'PY'
import json, mmap, sys
from rapidship.builder.prune import census, fatbin as F
out = {}
for path in sys.argv[1:]:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        out[path] = {name: {"containers": len(found), "by_arch": F.arch_bytes(found)}
                     for name, found in census.containers(data).items()}
print(json.dumps(out, indent=1))
PY
export CUBLAS_DIR=$(dirname "$CUBLASLT")
job gemm-original gemm; job gemm-original-again gemm
job gemm-original-eager gemm CUDA_MODULE_LOADING=EAGER
job gemm-8090 gemm LD_PRELOAD=/tmp/p/lt-8090/$LT
job gemm-8090-eager gemm LD_PRELOAD=/tmp/p/lt-8090/$LT CUDA_MODULE_LOADING=EAGER
job gemm-90 gemm LD_PRELOAD=/tmp/p/lt-90/$LT
job gemm-90-eager gemm LD_PRELOAD=/tmp/p/lt-90/$LT CUDA_MODULE_LOADING=EAGER
job gemm-80-on-sm90 gemm LD_PRELOAD=/tmp/p/lt-80/$LT
python3 "$HERE/jobs/forms_compare.py" "$OUT" | tee "$OUT/summary.json"
sed -i "s|$SITE|<site-packages>|g; s|/tmp/p/|<pruned>/|g" "$OUT"/*.json "$OUT/logs.txt"
tar czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls run-*.json) && rm "$OUT"/run-*.json
