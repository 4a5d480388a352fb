"""One NCCL communicator on GPU 0 (CuPy's binding) and its collectives, checked exactly; prints JSON.
Which libnccl the process mapped is part of the answer (the proof runs it with LD_PRELOAD)."""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", required=True)
    args = parser.parse_args()
    out = {"label": args.label}
    try:
        import cupy as cp
        from cupy.cuda import nccl

        start = time.monotonic()
        comm = nccl.NcclCommunicator.initAll([0])[0]
        out["init_s"] = round(time.monotonic() - start, 3)
        out["nccl_version"] = nccl.get_version()
        n = 64 * 1024 * 1024
        stream = cp.cuda.Stream.null
        checks = {}
        for name, dtype, code in (("float32", cp.float32, nccl.NCCL_FLOAT32), ("float16", cp.float16, nccl.NCCL_FLOAT16),
                                  ("int64", cp.int64, nccl.NCCL_INT64)):
            x = (cp.arange(n, dtype=cp.int64) % 1000).astype(dtype)
            for op_name, op in (("sum", nccl.NCCL_SUM), ("max", nccl.NCCL_MAX), ("avg", getattr(nccl, "NCCL_AVG", None))):
                if op is None:
                    continue
                y = cp.empty_like(x)
                comm.allReduce(x.data.ptr, y.data.ptr, n, code, op, stream.ptr)
                stream.synchronize()
                checks[f"allreduce {op_name} {name}"] = bool(cp.array_equal(x, y))
            z = cp.zeros_like(x)
            comm.broadcast(x.data.ptr, z.data.ptr, n, code, 0, stream.ptr)
            comm.reduce(x.data.ptr, z.data.ptr, n, code, nccl.NCCL_SUM, 0, stream.ptr)
            stream.synchronize()
            checks[f"broadcast+reduce {name}"] = bool(cp.array_equal(x, z))
        out["checks"] = checks
        out["exact"] = all(checks.values())
    except Exception as err:  # noqa: BLE001 - the proof records any failure as its result
        out["error"] = f"{type(err).__name__}: {err}"
    out["libnccl"] = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnccl" in line})
    print(json.dumps(out))
    return 0 if out.get("exact") else 1


if __name__ == "__main__":
    sys.exit(main())
