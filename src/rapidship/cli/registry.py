"""Tasks for a local run past `gates`: a loopback registry with a throwaway CA (docs/quickstart.md)."""

from __future__ import annotations

from pathlib import Path

from invoke import Collection

from rapidship.cli.options import task

from rapidship import console
from rapidship.errors import exits_cleanly

DIR_HELP = {"dir": "where the CA, the credential (env.sh, 0600), the data and the pid live (default build/registry)"}


@exits_cleanly
def _up(c, dir="build/registry", port=None, json=False):
    """Start a TLS registry on 127.0.0.1 (throwaway CA, one generated user) in the background."""
    from rapidship.cli.options import int_flag
    from rapidship.publish.loopback import up

    made = up(Path(dir), int_flag("--port", port) if port else None)
    console.err.print(f"registry on https://{made.host} (pid {made.pid}); CA and credential in {made.directory}/env.sh\n"
                      f"  . {made.directory}/env.sh   # then: invoke push --registry $RAPIDSHIP_REGISTRY/staging ...\n"
                      "  invoke registry.down       # stops it")
    if json:
        console.print_json({"registry": made.host, "pid": made.pid, "env": str(made.directory / "env.sh"),
                            "ca": str(made.directory / "ca.crt")})


@exits_cleanly
def _down(c, dir="build/registry"):
    """Stop the loopback registry that registry.up started from this directory."""
    from rapidship.publish.loopback import down

    stopped = down(Path(dir))
    console.err.print(f"stopped the registry on {stopped.host} (pid {stopped.pid})" if stopped
                      else f"no registry of {dir} is running")


registry_tasks = Collection("registry")
registry_tasks.add_task(task(name="up", help={**DIR_HELP, "port": "port on 127.0.0.1 (default: a free one)",
                                                      "json": "print the host, pid and paths as JSON on stdout"})(_up))
registry_tasks.add_task(task(name="down", help=DIR_HELP)(_down))
