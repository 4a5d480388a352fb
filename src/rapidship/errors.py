"""The one error type users see: a clear sentence naming where and what to do.

Stages raise `RapidshipError`; `tasks.py` turns it into a message on stderr and exit code 2,
so bad input never ends in a traceback.
"""

from __future__ import annotations

import errno
import functools
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


class RapidshipError(Exception):
    """A problem the user can fix. `where` names the file, yaml path or flag."""

    exit_code = 2

    def __init__(self, where: str, problem: str, fix: str = "") -> None:
        self.where = where
        self.problem = problem
        self.fix = fix
        super().__init__(self.message)

    def __reduce__(self):  # across a process boundary (the isolated solver) with all three parts
        return type(self), (self.where, self.problem, self.fix)

    @property
    def message(self) -> str:
        text = f"{self.where}: {self.problem}"
        return f"{text}\n  fix: {self.fix}" if self.fix else text


class ConfigError(RapidshipError):
    """Bad configuration (variants.yaml, policy files, harbor/)."""


class GateFailure(RapidshipError):
    """A gate said no. Exit code 1 tells CI 'the image is bad', not 'the input is bad'."""

    exit_code = 1


def exits_cleanly(fn: F) -> F:
    """Wrap an invoke task so a RapidshipError becomes one message and an exit code."""
    from invoke.exceptions import Exit

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RapidshipError as err:
            raise Exit(f"error: {err.message}", code=err.exit_code) from None
        except UnicodeDecodeError as err:  # a file a task reads as text is binary or another encoding
            raise Exit(f"error: a file is not UTF-8 text ({err.reason} at byte {err.start})\n"
                       "  fix: check the files the flags name (reports, configs) and their encoding", code=2) from None
        except OSError as err:  # a path the user named (or build/) cannot be read or written
            where = err.filename or "a file"
            if err.errno in (errno.ENOSPC, errno.EDQUOT):  # a stage that sizes its writes says more (diskspace.py)
                raise Exit(f"error: {where}: no space left on the file system; this step was not finished\n"
                           "  fix: free space there, or point the flag that names it (--out, --work, --tmp, "
                           "--build-dir) at a larger file system, and run it again", code=2) from None
            what = {IsADirectoryError: "is a directory where a file is expected",
                    NotADirectoryError: "is (inside) a file where a directory is expected",
                    FileExistsError: "is in the way (a file where a directory goes, or the reverse)",
                    PermissionError: "cannot be written or read with this user's permissions",
                    FileNotFoundError: "does not exist"}.get(type(err), err.strerror or type(err).__name__)
            raise Exit(f"error: {where}: {what}\n  fix: check the path, its parent folders and their "
                       "permissions (flags like --out name it)", code=2) from None

    return wrapper  # type: ignore[return-value]
