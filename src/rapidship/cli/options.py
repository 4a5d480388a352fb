"""Flag parsing shared by the task collections: variant picks, arches, whole numbers."""

from __future__ import annotations


VARIANTS_HELP = {"variants-file": "the matrix file (default variants.yaml)"}


def pick(m, ids, every):
    from rapidship.errors import ConfigError

    if not ids and not every:
        raise ConfigError("--variant", "no variant named", f"pass --variant ID or --all (ids: {', '.join(m.variants)})")
    return m.select(ids)


def arches_flag(v, value):
    """--arch: one arch, 'all' of the variant's, or (default) this machine's."""
    from rapidship.imagebuild.base import host_arch

    if value == "all":
        return list(v.arches)
    return [arch_flag(value or host_arch())]


def arch_flag(value):
    from rapidship.errors import ConfigError
    from rapidship.config.matrix import Arch

    try:
        return Arch(value)
    except ValueError:
        raise ConfigError("--arch", f"{value!r} is not amd64 or arm64", "pass --arch amd64 or --arch arm64") from None


def int_flag(flag, value):
    """A whole-number flag. Such flags default to strings in the task signatures: invoke's own int
    cast would end a bad value in a traceback instead of this one message."""
    try:
        return int(value)
    except (TypeError, ValueError):
        from rapidship.errors import ConfigError
        raise ConfigError(flag, f"{value!r} is not a whole number", f"e.g. {flag} 2") from None


def on_retry(attempt, fault, delay):
    """Registry and Harbor clients report each retry here (one yellow line)."""
    from rapidship import console

    console.err.print(f"[yellow]retry {attempt} in {delay:.1f}s: {fault}[/]")


def bad_flags_exit_2(project_root=None) -> None:
    """invoke answers a flag it cannot parse (unknown, missing value, not an int) with exit 1; the
    tasks promise 2 for bad input and 1 for a gate that said no. invoke parses a task's flags only
    after loading tasks.py, so this wraps that one step of its Program. It also refuses to run
    from another folder than the project root (invoke finds tasks.py in a parent folder, but the
    tasks read variants.yaml, templates/ and build/ where they are started)."""
    from invoke import program
    from invoke.exceptions import Exit, ParseError

    parse = program.Program.parse_tasks
    if getattr(parse, "bad_flags_exit_2", False):
        return

    def parse_tasks(self):
        from pathlib import Path

        if project_root is not None and Path.cwd().resolve() != Path(project_root).resolve():
            raise Exit(f"error: invoke runs in {Path.cwd()}, not in the project root {project_root}\n"
                       f"  fix: cd {project_root} (the tasks read variants.yaml, templates/ and build/ there)", code=2)
        try:
            parse(self)
        except ParseError as err:
            raise Exit(f"error: {err}\n  fix: see `invoke --help TASK` for its flags", code=2) from None

    parse_tasks.bad_flags_exit_2 = True
    program.Program.parse_tasks = parse_tasks
