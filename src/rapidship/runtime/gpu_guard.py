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

Which packages are guarded: the names below, and every top-level name of every distribution of the
env that ships device code (`derive`, from the prune record and the distributions' RECORD files,
written into the image at build time as GUARDED_FILE): `cupy_backends` with `cupy`, `nvforest`
with its library, whatever a lock adds. Other interpreters than the env's own (the OS python the
venv is made from, a fresh venv) reach the env's packages only through PYTHONPATH, where Python
reads no .pth: the env's `sitecustomize.py` installs the same guard there. Not closed: an
interpreter started with -S or -I that then puts the env on sys.path by hand (it chose to skip every
start-up hook), and a library loaded by ctypes directly.

Standard library only, like the rest of the runtime package.
"""

from __future__ import annotations

import os
import sys

GUARDED = frozenset({"cupy", "cupy_backends", "cupyx", "cudf", "cuml", "cugraph", "cuvs", "rmm", "dask_cuda",
                     "dask_cudf", "pylibcudf", "pylibraft", "raft_dask", "ucxx", "numba_cuda", "cuda", "nvforest"})
SWITCH_ENV = "RAPIDSHIP_GPU_GUARD"
GUARDED_FILE = "/opt/rapidship/guarded.txt"  # the env's own names (derive), one a line


class GuardFinder:
    """A meta path finder that finds nothing: it only runs the check before a guarded top-level
    package is imported for the first time, then steps out of the way."""

    def __init__(self, guarded: frozenset[str] = GUARDED) -> None:
        self.verdict: str | None = None  # None: not checked yet; "": checked, fine; else the FATAL sentence
        self.checking = False
        self.guarded = guarded

    def find_spec(self, name, path=None, target=None):  # noqa: D401 - importlib protocol
        if path is not None or name.partition(".")[0] not in self.guarded or self.checking:
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
    from . import gpu_view, rules, views  # the same rule and readers as the preflight (rapids_runtime.* in images)

    found = rules.arch_problems(views.read_prune_record(), gpu_view.read_gpus())
    return found[0] if found else ""


def install() -> None:
    """Called by the env's .pth (or sitecustomize) at interpreter start: cheap (one small file read),
    idempotent, and never raises."""
    try:
        if os.environ.get(SWITCH_ENV, "on").lower() in ("off", "0", "false", "no"):
            return
        if not any(type(f).__name__ == "GuardFinder" for f in sys.meta_path):
            sys.meta_path.insert(0, GuardFinder(GUARDED | _derived()))
    except Exception:  # noqa: BLE001 - a broken guard must not break every python process
        pass


def _derived(path: str = GUARDED_FILE) -> frozenset[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return frozenset(line.strip() for line in fh if line.strip().isidentifier())
    except OSError:
        return frozenset()


def derive(prefix: str, record: str) -> list[str]:
    """Every top-level import name of every distribution of the env at `prefix` that ships a file
    the prune record lists (a file with device code), from the distributions' RECORD files."""
    import glob
    import json

    try:
        with open(record, encoding="utf-8") as fh:
            files = {str(f.get("path", "")) for f in json.load(fh).get("files") or []}
    except (OSError, ValueError):
        return []
    names: set[str] = set()
    for site in glob.glob(os.path.join(prefix, "lib", "python*", "site-packages")):
        rel = os.path.relpath(site, prefix)
        for listing in glob.glob(os.path.join(site, "*.dist-info", "RECORD")):
            with open(listing, encoding="utf-8") as fh:
                paths = [line.split(",", 1)[0] for line in fh if line.strip()]
            if any(os.path.join(rel, p) in files for p in paths):
                names |= {p.split("/", 1)[0] for p in paths if "/" in p and not p.split("/", 1)[0].endswith(
                    (".dist-info", ".data", ".libs")) and p.split("/", 1)[0].isidentifier()}
                names |= {p[:-3] for p in paths if "/" not in p and p.endswith(".py")}
    return sorted(names - {"__pycache__"})


def uninstall() -> None:
    """For a process that makes the check itself (the doctor): no guard in its interpreter."""
    sys.meta_path[:] = [f for f in sys.meta_path  # by name: the .pth's copy may be another module object
                        if not (type(f).__name__ == "GuardFinder" and type(f).__module__.endswith("gpu_guard"))]


SITECUSTOMIZE = '''"""rapidship: the GPU guard for interpreters that reach this env through PYTHONPATH (which no .pth
is read from): the OS python the env is made from, a fresh venv. Then the next sitecustomize, as if
this one were not here."""
import importlib.machinery as _m, importlib.util as _u, os as _os, sys as _s
if "/opt/rapidship" not in _s.path:
    _s.path.append("/opt/rapidship")
try:
    from rapids_runtime import gpu_guard as _g
    _g.install()
except Exception:
    pass
_here = _os.path.dirname(_os.path.abspath(__file__))
_spec = _m.PathFinder.find_spec("sitecustomize", [p for p in _s.path if _os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _next = _u.module_from_spec(_spec)
    try:
        _spec.loader.exec_module(_next)
    except Exception:
        pass
'''

PTH_NAME = "rapidship-gpu-guard.pth"
PTH_LINE = ("import sys; sys.path.append('/opt/rapidship') if '/opt/rapidship' not in sys.path else None; "
            "exec('try:\\n from rapids_runtime import gpu_guard\\n gpu_guard.install()\\nexcept Exception:\\n pass')\n")


if __name__ == "__main__":  # at image build time: python -m rapids_runtime.gpu_guard PREFIX PRUNE_RECORD > GUARDED_FILE
    print("\n".join(derive(sys.argv[1], sys.argv[2])))
