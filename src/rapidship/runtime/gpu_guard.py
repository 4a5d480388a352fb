"""The GPU guard: the doctor's device-code check at the first import of a CUDA package, whatever
started the process.

The preflight runs only through the image's ENTRYPOINT; `docker run --entrypoint`, Kubernetes
`command:` and GitLab's `entrypoint: [""]` skip it. On a GPU that the image's pruned device code
does not cover, CuPy computed wrong sums without any error (measured on the H200), so this check
must hold anyway. The image's env carries a one-line `.pth` file that calls `install()` at every
interpreter start: it only puts a finder on `sys.meta_path` (no I/O, no import of anything heavy).
The first import of a guarded package (`cupy`, `cudf`, `cuml`, `rmm`, `dask_cuda`, ...) runs the
check once: the prune record's kept architectures against every GPU NVML shows that
CUDA_VISIBLE_DEVICES leaves visible, by `rules.covered`. An uncovered GPU makes that import fail
with the doctor's FATAL sentence (an ImportError); no NVML, no GPU or no prune record: no check,
as in the doctor. `RAPIDSHIP_GPU_GUARD=off` switches it off for debugging.

Standard library only, like the rest of the runtime package.
"""

from __future__ import annotations

import os
import sys

GUARDED = frozenset({"cupy", "cudf", "cuml", "cugraph", "cuvs", "rmm", "dask_cuda", "dask_cudf", "pylibcudf",
                     "pylibraft", "raft_dask", "ucxx", "numba_cuda", "cuda"})
SWITCH_ENV = "RAPIDSHIP_GPU_GUARD"


class GuardFinder:
    """A meta path finder that finds nothing: it only runs the check before a guarded top-level
    package is imported for the first time, then steps out of the way."""

    def __init__(self) -> None:
        self.verdict: str | None = None  # None: not checked yet; "": checked, fine; else the FATAL sentence
        self.checking = False

    def find_spec(self, name, path=None, target=None):  # noqa: D401 - importlib protocol
        if path is not None or name.partition(".")[0] not in GUARDED or self.checking:
            return None
        if self.verdict is None:
            self.checking = True  # the check imports modules itself
            try:
                self.verdict = problem()
            finally:
                self.checking = False
        if self.verdict:
            raise ImportError(f"rapids GPU guard: {self.verdict} (import of {name} refused; "
                              f"{SWITCH_ENV}=off to skip this check)", name=name)
        return None


def problem() -> str:
    """The first FATAL of the doctor's architecture check on this machine, or ''."""
    from . import rules, views  # the same rule and readers as the preflight (rapids_runtime.* in images)

    found = rules.arch_problems(views.read_prune_record(), views.read_gpus())
    return found[0] if found else ""


def install() -> None:
    """Called by the env's .pth at interpreter start: cheap, idempotent, and never raises."""
    try:
        if os.environ.get(SWITCH_ENV, "on").lower() in ("off", "0", "false", "no"):
            return
        if not any(isinstance(f, GuardFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, GuardFinder())
    except Exception:  # noqa: BLE001 - a broken guard must not break every python process
        pass


PTH_NAME = "rapidship-gpu-guard.pth"
PTH_LINE = ("import sys; sys.path.append('/opt/rapidship') if '/opt/rapidship' not in sys.path else None; "
            "exec('try:\\n from rapids_runtime import gpu_guard\\n gpu_guard.install()\\nexcept Exception:\\n pass')\n")
