"""Sizes as the runtime reads and prints them: the one size syntax of its flags and variables, and
bytes written for people. Standard library only.
"""

from __future__ import annotations



MiB = 2**20


GiB = 2**30


def parse_bytes(text: str | None) -> int | None:
    """Pure: a size as the runtime's own flags take it: k/m/g/t and kib/mib/gib/tib binary, kb/mb/gb/tb
    decimal, a bare number in bytes."""
    if text in (None, ""):
        return None
    t = str(text).strip().lower().replace(" ", "")
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9,
             "tb": 10**12, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "b": 1}
    for unit, mult in units.items():
        if t.endswith(unit):
            return int(float(t[: -len(unit)]) * mult)
    return int(float(t))


def _b(n: int | None) -> str:
    if n is None:
        return "unlimited"
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"
