"""Wheels made here, laid out as build backends write them: a pure one with an entry point, a
`.data/scripts` script whose shebang is `#!python` and a data file; a compiled one carrying an ELF
library (loaded with ctypes) for linux x86_64; a third under a non-canonical project name."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import zipfile
from pathlib import Path

NATIVE_C = "int answer(void) { return 42; }\n"


def _record(files: dict[str, bytes], dist_info: str) -> bytes:
    rows = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
            for name, data in files.items()]
    return ("\n".join(rows + [f"{dist_info}/RECORD,,"]) + "\n").encode()


def write_wheel(out: Path, name: str, version: str, tag: str, files: dict[str, bytes], requires: list[str],
                entry_points: str = "", pure: bool = True) -> Path:
    """<out>/<name>-<version>-<tag>.whl with METADATA, WHEEL, entry_points.txt and RECORD."""
    dist = f"{name}-{version}"
    dist_info = f"{dist}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: test wheel {name}\nLicense: MIT\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = dict(files)
    files[f"{dist_info}/METADATA"] = meta.encode()
    files[f"{dist_info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: rapidship-tests\nRoot-Is-Purelib: {str(pure).lower()}\n"
                                   f"Tag: {tag}\n").encode()
    if entry_points:
        files[f"{dist_info}/entry_points.txt"] = entry_points.encode()
    files[f"{dist_info}/RECORD"] = _record(files, dist_info)
    path = out / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files.items():
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if "/scripts/" in arcname or arcname.endswith(".so") else 0o644) << 16
            zf.writestr(info, data)
    return path


def make_wheels(out: Path, work: Path) -> list[Path]:
    gcc = shutil.which("gcc")
    if not gcc:
        raise RuntimeError("gcc is needed to build the compiled test wheel (apt-get install gcc)")
    out.mkdir(parents=True, exist_ok=True)
    src = work / "native.c"
    src.write_text(NATIVE_C)
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-o", str(work / "_native.so"), str(src)], check=True, capture_output=True)
    native_init = (b"import ctypes, os\n_lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), '_native.so'))\n"
                   b"def answer():\n    return _lib.answer()\ndef cli():\n    print('answer', answer())\n")
    tool_init = b"import sys\ndef main():\n    print('rtool main', sys.prefix)\n"
    legacy = b"#!python\nimport sys\nprint('rtool-legacy', sys.prefix)\n"
    return [
        write_wheel(out, "rtool", "1.2.0", "py3-none-any",
                    {"rtool/__init__.py": tool_init, "rtool-1.2.0.data/scripts/rtool-legacy": legacy,
                     "rtool-1.2.0.data/data/share/rtool/notes.txt": b"notes\n"},
                    ["rnative[speed]>=1.0,<2", "colorama; platform_system == 'Windows'",
                     "tomli>=1.1; python_version < '3.11'", "exceptiongroup; python_version >= '3.12'",
                     "Jinja2~=3.1.2; extra == 'docs'"],
                    "[console_scripts]\nrtool = rtool:main\n"),
        write_wheel(out, "rnative", "1.4.0", "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64",
                    {"rnative/__init__.py": native_init, "rnative/_native.so": (work / "_native.so").read_bytes()},
                    ["R.Data ==2.*; extra == 'speed'"], "[console_scripts]\nrnative-answer = rnative:cli\n", pure=False),
        write_wheel(out, "R_Data", "2.0.1", "py3-none-any", {"r_data/__init__.py": b"VALUE = 'data'\n"}, []),
    ]
