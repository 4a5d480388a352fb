"""A manifest's pod container started as a container on the real engine: what the tests of the
Kubernetes targets run where no cluster can be had. The env entries with a value and the args
the manifest writes, `$(VAR)` substituted as kubelet does; everything else is the caller's."""

from __future__ import annotations

import subprocess


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout.strip()


def substituted(args: list[str], env: dict[str, str]) -> list[str]:
    """What kubelet makes of `$(VAR)` in args."""
    out = []
    for a in args:
        for k, v in env.items():
            a = a.replace(f"$({k})", v)
        out.append(a)
    return out


def env_flags(container: dict, extra: dict[str, str] | None = None) -> list[str]:
    """`-e NAME=VALUE` for each env entry the manifest gives a value (valueFrom is kubelet's), and extra."""
    env = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e} | dict(extra or {})
    return [f for k, v in env.items() for f in ("-e", f"{k}={v}")]
