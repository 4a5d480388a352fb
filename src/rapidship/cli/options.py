"""Flag parsing shared by the task collections: variant picks, arches, whole numbers, and the
one table of short flags every task uses."""

from __future__ import annotations

import invoke

# One short flag per meaning, the same in every task; every other flag is long only. invoke's own
# choice (the first free letter of each name) gave -h to --prometheus-image and --harbor-config, so
# `invoke deploy --help` failed, -v meant something else per task, and a name without a free
# letter got `--` as its short flag.
SHORT_FLAGS = {"variant": "v", "arch": "a", "out": "o", "json": "j"}

# Tasks renamed for what they do; the old names still run (not listed), with a note.
RENAMED = {"gate": "scan-report", "harbor.gate": "harbor.scan"}


class FlagsTask(invoke.Task):
    """Every parameter is a flag: invoke made each one without a default a positional, which then
    took `--help` as its value. One that is needed and missing is one error naming it (exit 2)."""

    def __init__(self, body, *args, positional=None, **kwargs):
        super().__init__(body, *args, positional=positional if positional is not None else [], **kwargs)
        params = self.argspec(self.body).parameters.values()   # the context already left out
        self.needed = [p.name for p in params if p.default is p.empty and p.name not in self.positional]

    def __call__(self, *args, **kwargs):
        missing = [n for n in self.needed if kwargs.get(n) is None]
        if missing:
            flags = " ".join(f"--{n.replace('_', '-')} VALUE" for n in missing)
            raise invoke.Exit(f"error: {', '.join('--' + n.replace('_', '-') for n in missing)}: this task needs "
                              f"it\n  fix: pass {flags} (the task's --help lists its flags)", code=2)
        return super().__call__(*args, **kwargs)

    def get_arguments(self, ignore_unknown_help=None):
        """invoke consumes the help dict as it makes the arguments, so a second parser (a second
        Program in one process: the task reference) would show flags without their help."""
        kept = dict(self.help)
        try:
            return super().get_arguments(ignore_unknown_help)
        finally:
            self.help = kept

    def arg_opts(self, name, default, taken_names):
        opts = super().arg_opts(name, default, taken_names)
        long = opts["names"][0]
        short = SHORT_FLAGS.get(long)
        opts["names"] = [long, short] if short and short not in taken_names else [long]
        return opts


def task(*args, **kwargs):
    """invoke's @task (bare or with options), with the short flags of SHORT_FLAGS."""
    return invoke.task(*args, klass=FlagsTask, **kwargs)


VARIANTS_HELP = {"variants-file": "the matrix file (default variants.yaml)"}


def pick(m, ids, every):
    from rapidship.errors import ConfigError

    if not ids and not every:
        raise ConfigError("--variant", "no variant named", f"pass --variant ID or --all (ids: {', '.join(m.variants)})")
    return m.select(ids)


ARCH_DEFAULT = "default: the arches built for the variant, else this machine's"


def arches_flag(v, value, ws=None):
    """--arch: one arch, 'all' of the variant's, or (default) Workspace.default_arches: the one rule."""
    from rapidship.records import Workspace

    if value == "all":
        return list(v.arches)
    return [arch_flag(value)] if value else (ws or Workspace()).default_arches(v)


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
        tokens = list(self.core.unparsed)
        if tokens and tokens[0] in RENAMED:
            import sys

            print(f"note: invoke {tokens[0]} is now invoke {RENAMED[tokens[0]]}", file=sys.stderr)
            tokens[0] = self.core.unparsed[0] = RENAMED[tokens[0]]
        if tokens and {"-h", "--help"} & set(tokens[1:]):   # `invoke TASK --help`: a positional took it
            self.parser = self._make_parser()                # as its value, or a task's -h was another flag
            if tokens[0] in self.parser.contexts:
                try:
                    self.print_task_help(tokens[0])
                except BrokenPipeError:   # `| head`: the reader has what it wanted
                    pass
                raise Exit(code=0)
        try:
            parse(self)
        except ParseError as err:
            raise Exit(f"error: {err}\n  fix: {_parse_fix(err)}", code=2) from None

    parse_tasks.bad_flags_exit_2 = True
    program.Program.parse_tasks = parse_tasks


def _parse_fix(err) -> str:
    """The fix for a flag invoke could not parse: the closest flag of that task, and its help by name."""
    import difflib
    import re

    context = getattr(err, "context", None)
    name = getattr(context, "name", None)
    helps = f"`invoke {name} --help` lists its flags" if name else "`invoke --list` lists the tasks"
    word = re.search(r"'(-[^']*)'", str(err))
    flags = [f for f in getattr(context, "flags", {}) if f.startswith("--")]
    close = difflib.get_close_matches(word.group(1), flags, n=1) if word and flags else []
    return f"did you mean {close[0]}? ({helps})" if close else helps
