"""The command lines this module gives dsh-exec, and reading its replies.

Nothing here decides policy: every option is handed to the binary, which
resolves, checks and enforces it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Union

__all__ = ["DshExecError", "Duration", "Command", "Size", "StrPath"]

Duration = Union[float, int, timedelta, str]
"""Seconds (float or int), a timedelta, or a dsh-exec duration string (``"30s"``)."""
Size = Union[int, str]
"""Bytes, or a dsh-exec size string (``"64K"``, ``"1MiB"``)."""
StrPath = Union[str, "os.PathLike[str]"]
Command = Union[str, Sequence[str]]
"""A str is one script for ``bash -c``; a sequence of words is shell-quoted by dsh-exec."""


class DshExecError(Exception):
    """dsh-exec itself failed (exit 125 and ``{"error": {"code", "message"}}``),
    or gave no reply this module can read.

    ``code`` is dsh-exec's stable error code (``USAGE``, ``WORKDIR_UNUSABLE``,
    ``SANDBOX_UNAVAILABLE``, ... see docs/exit-status.md), or one of this
    module's for what the binary reports without a code: ``NO_REPLY`` (no
    JSON object where one was due), ``JOB_LOST`` (``job wait`` found the
    job's supervisor gone), ``JOB_WRITE_REFUSED`` (``job write`` exit 1).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        exit_status: int | None = None,
        stderr: str = "",
    ) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.exit_status = exit_status
        """The status dsh-exec exited with (negative: killed by that signal)."""
        self.stderr = stderr
        """What dsh-exec wrote on stderr."""


def duration(name: str, value: Duration) -> str:
    """A duration as dsh-exec reads it: whole milliseconds (``500ms``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected seconds or a timedelta, got a bool")
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        seconds = float(value)
    else:
        raise TypeError(f"{name}: expected seconds or a timedelta, got {type(value).__name__}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name}: expected a finite duration of 0 or more, got {value!r}")
    ms = round(seconds * 1000)
    if ms == 0 and seconds > 0:
        ms = 1  # a positive duration never becomes 0, which means "none"
    return f"{ms}ms"


def command_words(command: Command) -> list[str]:
    if isinstance(command, str):
        return [command]
    if isinstance(command, (bytes, bytearray)):
        raise TypeError("command: expected a str or a sequence of str, got bytes")
    if not isinstance(command, Sequence):
        raise TypeError(
            f"command: expected a str or a sequence of str, got {type(command).__name__}"
        )
    words = list(command)
    for word in words:
        if not isinstance(word, str):
            raise TypeError(f"command: every word must be a str, got {type(word).__name__}")
    if not words:
        raise ValueError("command: no words given")
    return words


def run_flags(
    *,
    workdir: StrPath | None,
    timeout: Duration | None,
    idle_timeout: Duration | None = None,
    sandbox: str | None,
    network: str | None,
    writable_roots: Iterable[StrPath],
    env: Mapping[str, str | None] | None,
    stdout_max_bytes: Size | None,
    stderr_max_bytes: Size | None,
    kill_after: Duration | None,
    extra_args: Iterable[str],
    transaction: bool = False,
    on_exit: str | None = None,
) -> list[str]:
    """The options of a run, explain or background start, in flag form.
    Raises TypeError (naming the argument) for a value of the wrong type,
    before anything runs."""
    for name, value in (("sandbox", sandbox), ("network", network), ("on_exit", on_exit)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name}: expected a str, got {type(value).__name__}")
    if not isinstance(transaction, bool):
        raise TypeError(f"transaction: expected a bool, got {type(transaction).__name__}")
    if env is not None and not isinstance(env, Mapping):
        raise TypeError(f"env: expected a mapping of names to values, got {type(env).__name__}")
    sizes = (("stdout_max_bytes", stdout_max_bytes), ("stderr_max_bytes", stderr_max_bytes))
    for name, size in sizes:
        if size is not None and (isinstance(size, bool) or not isinstance(size, (int, str))):
            kind = type(size).__name__
            raise TypeError(f"{name}: expected bytes (int) or a size string, got {kind}")
    if workdir is not None and not isinstance(workdir, (str, os.PathLike)):
        raise TypeError(f"workdir: expected a path, got {type(workdir).__name__}")
    args: list[str] = []
    if workdir is not None:
        args += ["-C", os.fspath(workdir)]
    if timeout is not None:
        args += ["--timeout", duration("timeout", timeout)]
    if idle_timeout is not None:
        args += ["--idle-timeout", duration("idle_timeout", idle_timeout)]
    if kill_after is not None:
        args += ["--kill-after", duration("kill_after", kill_after)]
    if sandbox is not None:
        args += ["--sandbox", sandbox]
    if network is not None:
        args += ["--network", network]
    if transaction:
        args.append("--transaction")
    if on_exit is not None:
        args += ["--on-exit", on_exit]
    if isinstance(writable_roots, (str, bytes, os.PathLike)):
        raise TypeError("writable_roots: expected a sequence of paths, not one path")
    for root in writable_roots:
        args += ["--writable-root", os.fspath(root)]
    for key, value in (env or {}).items():
        if "=" in key or not key:
            raise ValueError(f"env: invalid variable name {key!r}")
        # None passes the variable through from this process (even a scrubbed one).
        args += ["-e", key if value is None else f"{key}={value}"]
    if stdout_max_bytes is not None:
        args += ["--stdout-max-bytes", str(stdout_max_bytes)]
    if stderr_max_bytes is not None:
        args += ["--stderr-max-bytes", str(stderr_max_bytes)]
    if isinstance(extra_args, str):
        raise TypeError("extra_args: expected a sequence of str, not one str")
    args += list(extra_args)
    return args


def stdin_bytes(stdin: bytes | str | None) -> bytes | None:
    if stdin is None:
        return None
    if isinstance(stdin, str):
        return stdin.encode()
    if isinstance(stdin, (bytes, bytearray, memoryview)):
        return bytes(stdin)
    # bytes(123) would be 123 NUL bytes: refuse anything but bytes and text.
    raise TypeError(f"stdin: expected bytes or str, got {type(stdin).__name__}")


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def reply_object(status: int, stdout: bytes, stderr: bytes) -> Any:
    """The JSON value dsh-exec printed; raises DshExecError for its error
    object or for a reply that is no JSON."""
    text = _decode(stdout).strip()
    try:
        value = json.loads(text) if text else None
    except ValueError:
        value = None
    if isinstance(value, dict) and isinstance(value.get("error"), dict) and "command" not in value:
        error = value["error"]
        raise DshExecError(
            str(error.get("code", "")),
            str(error.get("message", "")),
            exit_status=status,
            stderr=_decode(stderr),
        )
    if value is None:
        raise error_from_stderr(status, stderr, default_code="NO_REPLY")
    return value


# `dsh-exec: error: MESSAGE (CODE)`: the one-line error of a subcommand that
# has no --json (job write, job kill).
_ERROR_LINE = re.compile(r"^dsh-exec: error: (?P<message>.*) \((?P<code>[A-Z][A-Z_]*)\)$")


def error_from_stderr(status: int, stderr: bytes, *, default_code: str) -> DshExecError:
    text = _decode(stderr)
    for line in reversed(text.splitlines()):
        match = _ERROR_LINE.match(line.strip())
        if match:
            return DshExecError(match["code"], match["message"], exit_status=status, stderr=text)
    how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
    detail = text.strip() or "nothing on stderr"
    return DshExecError(
        default_code, f"dsh-exec gave no reply ({how}): {detail}", exit_status=status, stderr=text
    )
