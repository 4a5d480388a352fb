"""CUDA's compatibility rule, stated once: which device code a GPU of a given compute capability
runs. The pruner (builder/prune, which carries this very file: builder/prune/cuda_rule.py is a
link to it) keeps code by it; the doctor and the GPU guard check GPUs against the kept code by it.

SASS for sm_XY runs on a GPU of the same major X with minor >= Y, never across majors (sm_80 code
does not run on an sm_90 H100/H200); arch-specific SASS (sm_90a, sm_100a) only on that exact
arch; PTX is JIT-compiled for any GPU of that arch or later. Standard library only, no imports.
"""


def code_runs_on(arch: int, gpu: int, ptx: bool = False, specific: bool = False) -> bool:
    """Does code built for `arch` (major*10+minor) run on a GPU of compute capability `gpu`?"""
    if ptx:
        return arch <= gpu
    if specific:
        return arch == gpu
    return arch // 10 == gpu // 10 and arch % 10 <= gpu % 10
