"""One library's pruned kernels exercised on GPU 0; prints JSON. Run once per copy of the library
(LD_PRELOAD picks the copy; which one the process mapped is part of the answer).

  fft   cuFFT through CuPy: C2C, R2C and C2R, forward and inverse, 1-3 dimensions, single and double
        precision, powers of two, primes and mixed radices; sha256 of every result and its error
        against NumPy's FFT in double precision.
  gemm  cuBLASLt directly (cublasLtMatmul, heuristic algorithm) and through cuBLAS (cublasGemmEx)
        in fp32, fp16 and bf16; then cuBLASLt in tf32, fp8 (e4m3, the TN layout sm_90 runs), with
        epilogues (ReLU, GELU, bias) and strided batches; sha256 of every result and its error
        against a float64 product.
  sparse  cuSPARSE through CuPy (CSR times vector and matrix, CSR times CSR, transposes) in single and
        double precision; sha256 of every result and its error against SciPy-free float64 NumPy.
  nccl  NCCL's one-rank reduction kernel (a pre-multiplied sum: with one rank NCCL copies for
        sum/max, but scaling needs its own kernel) in fp32, fp16 and bf16, checked exactly.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import hashlib
import json
import os
import sys
import time

import numpy as np


def sha(a) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()[:16]


def mapped(name: str) -> list[str]:
    return sorted({line.split()[-1] for line in open("/proc/self/maps") if name in line})


def fft_cases():
    import cupy as cp
    rng = np.random.default_rng(7)
    shapes = [(16,), (1000,), (1009,), (1024,), (4096,), (7919,), (30030,), (59049,), (78125,), (1 << 20,),
              (64, 4096), (512, 512), (1000, 999), (64, 64, 64), (30, 50, 100)]
    out = {}
    for precision, real_t, cplx_t in (("single", np.float32, np.complex64), ("double", np.float64, np.complex128)):
        for shape in shapes:
            axes = None if len(shape) > 1 and shape != (64, 4096) else (-1,)
            host = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(cplx_t)
            real = rng.standard_normal(shape).astype(real_t)
            x, r = cp.asarray(host), cp.asarray(real)
            tag = f"{precision} {'x'.join(map(str, shape))}"
            results = {
                "c2c forward": (cp.fft.fftn(x, axes=axes), np.fft.fftn(host.astype(np.complex128), axes=axes)),
                "c2c inverse": (cp.fft.ifftn(x, axes=axes), np.fft.ifftn(host.astype(np.complex128), axes=axes)),
                "r2c": (cp.fft.rfftn(r, axes=axes), np.fft.rfftn(real.astype(np.float64), axes=axes)),
            }
            half = cp.fft.rfftn(r, axes=axes)
            results["c2r"] = (cp.fft.irfftn(half, s=shape if axes is None else shape[-1:], axes=axes),
                              real.astype(np.float64))
            for kind, (got, want) in results.items():
                g = cp.asnumpy(got)
                err = float(np.abs(g - want).max() / max(np.abs(want).max(), 1e-30))
                out[f"{kind} {tag}"] = {"sha": sha(g), "rel_err": err}
    return out


CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
COMPUTE_32F = 68
GEMM_SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (127, 255, 513), (8192, 64, 2048), (1, 4096, 4096),
               (3000, 2000, 1000)]


def _bf16(a: np.ndarray) -> np.ndarray:
    return (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def gemm_cases():
    import cupy as cp
    libdir = os.environ["CUBLAS_DIR"]
    lt_path = glob.glob(f"{libdir}/libcublasLt.so.*")[0]
    # by soname when a pruned copy is preloaded (by path would map the original a second time)
    lt = ctypes.CDLL(os.path.basename(lt_path) if os.environ.get("LD_PRELOAD") else lt_path)
    blas = ctypes.CDLL(glob.glob(f"{libdir}/libcublas.so.*")[0])
    lt_handle, blas_handle = ctypes.c_void_p(), ctypes.c_void_p()
    assert lt.cublasLtCreate(ctypes.byref(lt_handle)) == 0
    assert blas.cublasCreate_v2(ctypes.byref(blas_handle)) == 0
    workspace = cp.empty(64 << 20, dtype=cp.uint8)
    rng = np.random.default_rng(11)
    out = {}
    for name, ctype in (("fp32", CUDA_R_32F), ("fp16", CUDA_R_16F), ("bf16", CUDA_R_16BF)):
        for m, n, k in GEMM_SHAPES:
            a = rng.standard_normal((k, m)).astype(np.float32)   # column-major m x k
            b = rng.standard_normal((n, k)).astype(np.float32)   # column-major k x n
            if name == "fp16":
                a, b = a.astype(np.float16), b.astype(np.float16)
                exact_a, exact_b = a.astype(np.float64), b.astype(np.float64)
            elif name == "bf16":
                a, b = _bf16(a), _bf16(b)
                exact_a, exact_b = _from_bf16(a).astype(np.float64), _from_bf16(b).astype(np.float64)
            else:
                exact_a, exact_b = a.astype(np.float64), b.astype(np.float64)
            want = exact_b @ exact_a        # row-major view of the column-major m x n product
            da, db = cp.asarray(a), cp.asarray(b)
            for api in ("cublasLt", "cublas"):
                dc = cp.zeros((n, m), dtype=da.dtype)
                if api == "cublasLt":
                    status = _lt_matmul(lt, lt_handle, workspace, da, db, dc, (m, n, k), (ctype,) * 3)
                else:
                    status = _gemm_ex(blas, blas_handle, da, db, dc, (m, n, k), ctype, COMPUTE_32F)
                out[f"{api} {name} {m}x{n}x{k}"] = _result(status, cp.asnumpy(dc), want)
    out |= lt_more_cases(lt, lt_handle, blas, blas_handle, workspace, rng)
    return out


# cublasLt enums (cublasLt.h): matmul descriptor and matrix layout attributes, epilogues
DESC_TRANSA, DESC_EPILOGUE, DESC_BIAS_POINTER = 3, 7, 8
LAYOUT_BATCH_COUNT, LAYOUT_STRIDED_BATCH_OFFSET = 5, 6
EPILOGUES = {"relu": 2, "bias": 4, "relu+bias": 6, "gelu": 32, "gelu+bias": 36}
COMPUTE_32F_FAST_TF32, CUDA_R_8F_E4M3 = 77, 28
E4M3 = {-2.0: 0xC0, -1.0: 0xB8, -0.5: 0xB0, 0.0: 0x00, 0.5: 0x30, 1.0: 0x38, 2.0: 0x40}  # exact in e4m3


def _lt_matmul(lt, handle, workspace, a, b, c, dims, types, compute=COMPUTE_32F, transa=False, epilogue=None,
               bias=None, batch=None):
    """One cublasLtMatmul, column-major: A is m x k (k x m stored when transa), B k x n, D m x n."""
    import cupy as cp
    m, n, k = dims
    a_type, b_type, d_type = types
    desc = ctypes.c_void_p()
    assert lt.cublasLtMatmulDescCreate(ctypes.byref(desc), compute, CUDA_R_32F) == 0
    if transa:
        lt.cublasLtMatmulDescSetAttribute(desc, DESC_TRANSA, ctypes.byref(ctypes.c_int32(1)), ctypes.c_size_t(4))
    if epilogue is not None:
        lt.cublasLtMatmulDescSetAttribute(desc, DESC_EPILOGUE, ctypes.byref(ctypes.c_int32(epilogue)), ctypes.c_size_t(4))
    if bias is not None:
        lt.cublasLtMatmulDescSetAttribute(desc, DESC_BIAS_POINTER, ctypes.byref(ctypes.c_void_p(bias.data.ptr)), ctypes.c_size_t(8))
    lay = [ctypes.c_void_p() for _ in range(3)]
    shapes = (((k, m) if transa else (m, k)), (k, n), (m, n))
    for layout, kind, (rows, cols) in zip(lay, (a_type, b_type, d_type), shapes):
        assert lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), kind, ctypes.c_uint64(rows), ctypes.c_uint64(cols),
                                             ctypes.c_int64(rows)) == 0
        if batch:
            lt.cublasLtMatrixLayoutSetAttribute(layout, LAYOUT_BATCH_COUNT, ctypes.byref(ctypes.c_int32(batch)), ctypes.c_size_t(4))
            lt.cublasLtMatrixLayoutSetAttribute(layout, LAYOUT_STRIDED_BATCH_OFFSET,
                                                ctypes.byref(ctypes.c_int64(rows * cols)), ctypes.c_size_t(8))
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    status = lt.cublasLtMatmul(handle, desc, ctypes.byref(one), ctypes.c_void_p(a.data.ptr), lay[0],
                               ctypes.c_void_p(b.data.ptr), lay[1], ctypes.byref(zero), ctypes.c_void_p(c.data.ptr),
                               lay[2], ctypes.c_void_p(c.data.ptr), lay[2], None, ctypes.c_void_p(workspace.data.ptr),
                               ctypes.c_size_t(workspace.nbytes), ctypes.c_void_p(0))
    cp.cuda.runtime.deviceSynchronize()
    return status


def _gemm_ex(blas, handle, a, b, c, dims, ctype, compute) -> int:
    """One cublasGemmEx, column-major, no transposes; synchronised."""
    import cupy as cp
    m, n, k = dims
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    status = blas.cublasGemmEx(handle, 0, 0, m, n, k, ctypes.byref(one), ctypes.c_void_p(a.data.ptr), ctype, m,
                               ctypes.c_void_p(b.data.ptr), ctype, k, ctypes.byref(zero), ctypes.c_void_p(c.data.ptr),
                               ctype, m, compute, -1)
    cp.cuda.runtime.deviceSynchronize()
    return status


def _result(status: int, got: np.ndarray, want: np.ndarray) -> dict:
    """A GEMM's record: its status, the sha256 of its bytes, its error against the float64 product
    (bf16 results arrive as uint16 bits)."""
    value = _from_bf16(got) if got.dtype == np.uint16 else got.astype(np.float64)
    return {"status": status, "sha": sha(got), "rel_err": float(np.abs(value - want).max() / max(np.abs(want).max(), 1e-30))}


def lt_more_cases(lt, handle, blas, blas_handle, workspace, rng) -> dict:
    import cupy as cp
    out = {}

    def record(key, status, got, want):
        out[key] = _result(status, got, want)

    # tf32: fp32 data, tensor cores (both APIs)
    for m, n, k in GEMM_SHAPES[:4]:
        a = rng.standard_normal((k, m)).astype(np.float32)
        b = rng.standard_normal((n, k)).astype(np.float32)
        want = b.astype(np.float64) @ a.astype(np.float64)
        da, db = cp.asarray(a), cp.asarray(b)
        dc = cp.zeros((n, m), dtype=cp.float32)
        status = _lt_matmul(lt, handle, workspace, da, db, dc, (m, n, k), (CUDA_R_32F,) * 3, COMPUTE_32F_FAST_TF32)
        record(f"cublasLt tf32 {m}x{n}x{k}", status, cp.asnumpy(dc), want)
        dc = cp.zeros((n, m), dtype=cp.float32)
        status = _gemm_ex(blas, blas_handle, da, db, dc, (m, n, k), CUDA_R_32F, COMPUTE_32F_FAST_TF32)
        record(f"cublas tf32 {m}x{n}x{k}", status, cp.asnumpy(dc), want)
    # fp8 e4m3 in, bf16 out: A stored k x m and transposed (TN), values exact in e4m3
    values = np.array(sorted(E4M3))
    codes = np.array([E4M3[v] for v in values], dtype=np.uint8)
    for m, n, k in ((1024, 1024, 1024), (4096, 4096, 4096), (256, 8192, 512), (2048, 512, 4096)):
        ia, ib = rng.integers(0, len(values), (m, k)), rng.integers(0, len(values), (n, k))
        want = values[ib] @ values[ia].T          # row-major view (n x m) of the column-major m x n product
        da, db = cp.asarray(codes[ia]), cp.asarray(codes[ib])   # A: k x m column-major = m rows of k
        dc = cp.zeros((n, m), dtype=cp.uint16)
        status = _lt_matmul(lt, handle, workspace, da, db, dc, (m, n, k), (CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF),
                            transa=True)
        record(f"cublasLt fp8-e4m3 {m}x{n}x{k}", status, cp.asnumpy(dc), want)
    # epilogues (fp16 and bf16 data, a bias per row of D)
    for name, ctype in (("fp16", CUDA_R_16F), ("bf16", CUDA_R_16BF)):
        for m, n, k in ((1024, 1024, 1024), (4096, 1024, 2048), (127, 255, 513)):
            a32 = rng.standard_normal((k, m)).astype(np.float32)
            b32 = rng.standard_normal((n, k)).astype(np.float32)
            bias32 = rng.standard_normal(m).astype(np.float32)
            if name == "fp16":
                a, b, bias = a32.astype(np.float16), b32.astype(np.float16), bias32.astype(np.float16)
                ea, eb, ebias = a.astype(np.float64), b.astype(np.float64), bias.astype(np.float64)
            else:
                a, b, bias = _bf16(a32), _bf16(b32), _bf16(bias32)
                ea, eb, ebias = (_from_bf16(x).astype(np.float64) for x in (a, b, bias))
            base = eb @ ea
            da, db, dbias = cp.asarray(a), cp.asarray(b), cp.asarray(bias)
            for label, code in EPILOGUES.items():
                want = base + ebias if "bias" in label else base
                if "relu" in label:
                    want = np.maximum(want, 0)
                elif "gelu" in label:   # tanh form, as cuBLASLt computes it
                    want = 0.5 * want * (1 + np.tanh(0.7978845608028654 * (want + 0.044715 * want ** 3)))
                dc = cp.zeros((n, m), dtype=da.dtype)
                status = _lt_matmul(lt, handle, workspace, da, db, dc, (m, n, k), (ctype,) * 3, epilogue=code,
                                    bias=dbias if "bias" in label else None)
                record(f"cublasLt {name} {label} {m}x{n}x{k}", status, cp.asnumpy(dc), want)
    # strided batches
    for name, ctype, dtype in (("fp32", CUDA_R_32F, np.float32), ("fp16", CUDA_R_16F, np.float16)):
        for batch, (m, n, k) in ((16, (256, 256, 256)), (64, (128, 512, 64)), (8, (1000, 300, 700))):
            a = rng.standard_normal((batch, k, m)).astype(dtype)
            b = rng.standard_normal((batch, n, k)).astype(dtype)
            want = np.einsum("bnk,bkm->bnm", b.astype(np.float64), a.astype(np.float64))
            da, db = cp.asarray(a), cp.asarray(b)
            dc = cp.zeros((batch, n, m), dtype=dtype)
            status = _lt_matmul(lt, handle, workspace, da, db, dc, (m, n, k), (ctype,) * 3, batch=batch)
            record(f"cublasLt {name} batch{batch} {m}x{n}x{k}", status, cp.asnumpy(dc), want)
    return out


def sparse_cases():
    import cupy as cp
    from cupyx.scipy import sparse
    rng = np.random.default_rng(5)
    out = {}
    for dtype in (np.float32, np.float64):
        for n, density in ((1000, 0.01), (3000, 0.005), (4096, 0.02)):
            dense = rng.standard_normal((n, n)) * (rng.random((n, n)) < density)
            a = sparse.csr_matrix(cp.asarray(dense.astype(dtype)))
            v = rng.standard_normal(n).astype(dtype)
            m = rng.standard_normal((n, 8)).astype(dtype)
            results = {"csr @ v": (a @ cp.asarray(v), dense @ v), "csr.T @ v": (a.T @ cp.asarray(v), dense.T @ v),
                       "csr @ dense": (a @ cp.asarray(m), dense @ m),
                       "csr @ csr": ((a @ a).toarray(), dense @ dense)}
            for kind, (got, want) in results.items():
                g = cp.asnumpy(got)
                err = float(np.abs(g - want).max() / max(np.abs(want).max(), 1e-30))
                out[f"{kind} {np.dtype(dtype).name} {n}"] = {"sha": sha(g), "rel_err": err}
    return out


def nccl_cases():
    import cupy as cp
    nccl = ctypes.CDLL(os.environ["NCCL_LIB"])
    comm = ctypes.c_void_p()
    start = time.monotonic()
    rc = nccl.ncclCommInitAll(ctypes.byref(comm), 1, (ctypes.c_int * 1)(0))
    if rc:
        return {"init": {"status": rc}}
    init_s = round(time.monotonic() - start, 3)
    nccl.ncclGetErrorString.restype = ctypes.c_char_p
    n = 16 << 20
    out = {}
    for name, dtype_code, host_scalar, make in (
            ("fp32", 7, np.array([0.5], np.float32), lambda x: x.astype(cp.float32)),
            ("fp16", 6, np.array([0.5], np.float16), lambda x: x.astype(cp.float16)),
            ("bf16", 9, np.array([0x3F00], np.uint16), lambda x: cp.asarray(_bf16(cp.asnumpy(x))))):
        x = make(cp.arange(n, dtype=cp.int64) % 1000)
        y = cp.zeros_like(x)
        op = ctypes.c_int()
        rc = nccl.ncclRedOpCreatePreMulSum(ctypes.byref(op), ctypes.c_void_p(host_scalar.ctypes.data), dtype_code, 1,
                                           comm)
        if rc == 0:
            rc = nccl.ncclAllReduce(ctypes.c_void_p(x.data.ptr), ctypes.c_void_p(y.data.ptr), ctypes.c_size_t(n),
                                    dtype_code, op, comm, ctypes.c_void_p(0))
        try:
            cp.cuda.runtime.deviceSynchronize()
            sync = "ok"
        except Exception as err:  # noqa: BLE001 - a kernel that cannot load is the negative result
            sync = f"{type(err).__name__}: {err}"
        async_rc = ctypes.c_int()
        nccl.ncclCommGetAsyncError(comm, ctypes.byref(async_rc))
        if name == "bf16":
            exact = bool(np.array_equal(_from_bf16(cp.asnumpy(y)), _from_bf16(cp.asnumpy(x)) * 0.5))
        else:
            exact = bool(cp.array_equal(y, x * x.dtype.type(0.5)))
        out[f"premulsum {name}"] = {"status": rc, "async": async_rc.value, "sync": sync, "exact": exact and rc == 0,
                                    "init_s": init_s,
                                    "error": nccl.ncclGetErrorString(rc).decode() if rc else ""}
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["fft", "gemm", "sparse", "nccl"])
    parser.add_argument("--label", required=True)
    args = parser.parse_args()
    out = {"label": args.label, "loading": os.environ.get("CUDA_MODULE_LOADING", "default (lazy)")}
    start = time.monotonic()
    try:
        out["cases"] = {"fft": fft_cases, "gemm": gemm_cases, "sparse": sparse_cases, "nccl": nccl_cases}[args.what]()
    except Exception as err:  # noqa: BLE001 - the proof records any failure as its result
        out["error"] = f"{type(err).__name__}: {str(err)[:300]}"
    out["seconds"] = round(time.monotonic() - start, 2)
    out["mapped"] = mapped({"fft": "libcufft", "gemm": "libcublas", "sparse": "libcusparse", "nccl": "libnccl"}[args.what])
    print(json.dumps(out))
    return 0 if "error" not in out else 1


if __name__ == "__main__":
    sys.exit(main())
