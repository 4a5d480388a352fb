"""The one adapter to the Docker engine: every stage talks to it through here.

The CLI, not docker-py: BuildKit builds can only go through a CLI on these engines (docker-py
builds with the classic builder, and dockerd 20.10's BuildKit needs the 20.10 client or buildx),
`docker save` / `export` stream straight into tarfile through a pipe, and the same commands are
what an operator types to reproduce a step. One way for everything keeps errors uniform: a
missing image, a failed stream or a refused run is one RapidshipError naming the ref.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from contextlib import contextmanager
from typing import IO, Iterator

from rapidship.errors import ConfigError, RapidshipError

SIGPIPE_EXITS = (0, -13, 141)  # we stopped reading a stream early


class Engine:
    """Docker engine operations, through `cli` (the plain client); builds pick a BuildKit client."""

    def __init__(self, cli: str = "docker") -> None:
        self.cli = cli

    # ---- images ----

    def inspect(self, ref: str) -> dict:
        found = self.try_inspect(ref)
        if found is None:
            raise RapidshipError(ref, "image not found in the engine", "build it first: invoke build --variant ...")
        return found

    def try_inspect(self, ref: str) -> dict | None:
        proc = self.run_cli(["image", "inspect", ref])
        if proc.returncode != 0:
            if any(m in proc.stderr for m in ("No such image", "No such object", "invalid reference format")):
                return None
            # not "absent": an engine that cannot be asked would read as "build it first"
            raise RapidshipError("docker engine", f"cannot inspect {ref}: {proc.stderr.strip()[-300:]}",
                                 "check that the engine runs (docker info) and that DOCKER_HOST names the one "
                                 "the image was built on")
        try:
            return json.loads(proc.stdout)[0]
        except (ValueError, IndexError):
            raise RapidshipError(ref, "the engine answered inspect with something that is not JSON",
                                 "check the engine (docker info)") from None

    def exists(self, ref: str) -> bool:
        return self.try_inspect(ref) is not None

    def history(self, ref: str) -> list[str]:
        proc = self.run_cli(["history", "--no-trunc", "--format", "{{.CreatedBy}}", ref])
        if proc.returncode != 0:
            raise RapidshipError(ref, "cannot read image history", "build it first with invoke build")
        return proc.stdout.splitlines()

    def tag(self, source: str, target: str) -> None:
        self._checked(["tag", source, target], target)

    def pull(self, ref: str, platform: str | None = None, env: dict | None = None) -> None:
        self._checked(["pull", "--quiet", *(["--platform", platform] if platform else []), ref], ref, env)

    def remove_images(self, *refs: str) -> None:
        self.run_cli(["rmi", "--force", *refs])

    # ---- streams ----

    @contextmanager
    def stream(self, args: list[str], what: str) -> Iterator[IO[bytes]]:
        """stdout of `docker ARGS` as a byte stream; a failure after the stream ends is an error."""
        proc = subprocess.Popen([self.cli, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            yield proc.stdout
        finally:
            proc.stdout.close()
            stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            code = proc.wait()
            if code not in SIGPIPE_EXITS and stderr.strip():
                raise RapidshipError(what, f"docker {args[0]} failed: {stderr.strip()[-300:]}",
                                     "check the image ref and the engine (docker info)")

    def save(self, *refs: str) -> Iterator[IO[bytes]]:
        """`docker save` of refs (shared layers once): a docker-archive tar stream."""
        return self.stream(["save", *refs], " ".join(refs))

    @contextmanager
    def exported(self, ref: str) -> Iterator[IO[bytes]]:
        """The image's flattened filesystem as a tar stream (`docker export` of a created container)."""
        name = f"rapidship-{uuid.uuid4().hex[:12]}"
        made = self.run_cli(["create", "--name", name, ref, "true"])
        if made.returncode != 0:
            raise RapidshipError(ref, f"cannot create a container to read the image: {made.stderr.strip()}",
                                 "build it first: invoke build --variant ...")
        try:
            with self.stream(["export", name], ref) as raw:
                yield raw
        finally:
            self.run_cli(["rm", "-f", name])

    def save_process(self, *refs: str) -> subprocess.Popen:
        """A running `docker save` for callers that move its bytes themselves (splice into zstd)."""
        return subprocess.Popen([self.cli, "save", *refs], stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def load(self) -> subprocess.Popen:
        """A `docker load` process: write a docker-archive to its stdin, read its report on stdout."""
        return subprocess.Popen([self.cli, "load"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)

    # ---- containers ----

    def run_container(self, args: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
        """`docker run ARGS` (the caller names the flags: profile, user, mounts)."""
        return self.run_cli(["run", *args], timeout=timeout)

    def container_state(self, name: str) -> dict:
        proc = self.run_cli(["inspect", "--format", "{{json .State}}", name])
        try:
            return json.loads(proc.stdout) if proc.returncode == 0 else {}
        except ValueError:
            return {}

    def kill(self, name: str) -> None:
        self.run_cli(["kill", name])

    def remove_container(self, name: str) -> None:
        self.run_cli(["rm", "-f", name])

    def run_detached(self, args: list[str], what: str) -> str:
        """`docker run --detach ARGS` (the caller names the flags): the container id; a refused run
        (bad flag, name in use, missing network) is one error with the engine's words."""
        proc = self.run_cli(["run", "--detach", *args], timeout=120)
        if proc.returncode != 0:
            raise RapidshipError(what, f"docker run failed: {proc.stderr.strip()[-300:]}",
                                 "check the image, the flags and the engine (docker info)")
        return proc.stdout.strip()

    def logs(self, name: str, tail: int | None = None) -> tuple[str, str]:
        """A container's stdout and stderr so far (running or exited); ("", "") when it is gone."""
        proc = self.run_cli(["logs", *(["--tail", str(tail)] if tail else []), name], timeout=60)
        return (proc.stdout, proc.stderr) if proc.returncode == 0 else ("", "")

    def inspect_container(self, name: str) -> dict:
        """`docker inspect` of a container ({} when it is gone)."""
        proc = self.run_cli(["container", "inspect", name])
        try:
            return json.loads(proc.stdout)[0] if proc.returncode == 0 else {}
        except (ValueError, IndexError):
            return {}

    def oom_events(self, label: str, since: float, until: float | None = None) -> list[str]:
        """Names of the containers carrying `label` for which the engine reported an OOM kill between
        `since` and `until` (unix seconds), one entry per event. The kernel killing a process other
        than a container's init (a nanny's worker) sets no State.OOMKilled; the event is still sent."""
        import time

        args = ["events", "--since", f"{since:.3f}", "--until", f"{(until or time.time()):.3f}",
                "--filter", "event=oom", "--filter", f"label={label}", "--format", "{{.Actor.Attributes.name}}"]
        proc = self.run_cli(args, timeout=60)
        return proc.stdout.split() if proc.returncode == 0 else []

    def containers_labelled(self, label: str) -> list[str]:
        """Names of the containers, running or not, that carry `label` (key=value)."""
        proc = self.run_cli(["ps", "--all", "--filter", f"label={label}", "--format", "{{.Names}}"])
        return proc.stdout.split() if proc.returncode == 0 else []

    # ---- networks ----

    def create_network(self, name: str, internal: bool = True, labels: dict | None = None) -> str:
        """A user-defined bridge network; `internal`: no route out of it (no gateway, no NAT)."""
        args = ["network", "create", "--driver", "bridge", *(["--internal"] if internal else [])]
        for key, value in (labels or {}).items():
            args += ["--label", f"{key}={value}"]
        proc = self.run_cli([*args, name], timeout=60)
        if proc.returncode != 0:
            raise RapidshipError(f"network {name}", f"docker network create failed: {proc.stderr.strip()[-300:]}",
                                 "check the engine (docker network ls): address pools may be used up")
        return proc.stdout.strip()

    def inspect_network(self, name: str) -> dict:
        proc = self.run_cli(["network", "inspect", name])
        try:
            return json.loads(proc.stdout)[0] if proc.returncode == 0 else {}
        except (ValueError, IndexError):
            return {}

    def remove_network(self, name: str) -> bool:
        """Remove a network; False when the engine refused (a container still attached) or it is gone."""
        return self.run_cli(["network", "rm", name], timeout=60).returncode == 0

    # ---- builds ----

    def buildkit_cli(self) -> str:
        """A client that builds with BuildKit: buildx when present, else a 20.10-23.x client
        (dockerd 20.10's BuildKit; the 24+ clients refuse BuildKit without buildx)."""
        if self.run_cli(["buildx", "version"]).returncode == 0:
            return self.cli
        for candidate in ("/usr/bin/docker", shutil.which(self.cli)):
            if candidate and os.path.exists(candidate):
                version = self.run_cli(["version", "--format", "{{.Client.Version}}"], cli=candidate).stdout.strip()
                if version.startswith(("19.", "20.", "21.", "22.")):
                    return candidate
        raise ConfigError("docker", "no docker CLI that can build with BuildKit (need buildx, or a 20.10-23.x client)",
                          "install docker-buildx, or the distribution's docker.io package")

    def build_process(self, argv: list[str], env: dict) -> subprocess.Popen:
        """A running `docker build` (argv from build_command, its client from buildkit_cli):
        output as text lines, stderr folded in, for the caller's progress and log."""
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

    def build_logged(self, args: list[str], log, env: dict, what: str) -> None:
        """`docker build ARGS` with BuildKit, its output appended to `log`; a failure names the log."""
        with open(log, "ab") as out:
            proc = subprocess.run([self.buildkit_cli(), "build", *args], stdout=out, stderr=subprocess.STDOUT,
                                  env=env, check=False)
        if proc.returncode != 0:
            raise RapidshipError(what, f"docker build failed with exit code {proc.returncode}: see {log}",
                                 "check the log and retry")

    # ---- plumbing ----

    def run_cli(self, args: list[str], timeout: float | None = None, env: dict | None = None,
                cli: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([cli or self.cli, *args], capture_output=True, text=True, check=False,
                              timeout=timeout, env=env)

    def _checked(self, args: list[str], what: str, env: dict | None = None) -> None:
        proc = self.run_cli(args, env=env)
        if proc.returncode != 0:
            raise RapidshipError(what, f"docker {args[0]} failed: {proc.stderr.strip()[-300:]}",
                                 "check the ref, the registry credentials and the engine")


ENGINE = Engine()
