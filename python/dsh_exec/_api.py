"""run, start, explain, the transaction decisions (commit, discard, diff) and
their asyncio twins: each calls the dsh-exec binary."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping
from typing import Any, Union

from ._binary import find_binary
from ._cli import (
    Command,
    DshExecError,
    Duration,
    Size,
    StrPath,
    command_words,
    duration,
    error_from_stderr,
    reply_object,
    run_flags,
    stdin_bytes,
)
from ._results import CommitReport, JobRead, RunResult

__all__ = [
    "AsyncJob",
    "Job",
    "acommit",
    "adiff",
    "adiscard",
    "aexplain",
    "arun",
    "astart",
    "commit",
    "diff",
    "discard",
    "explain",
    "run",
    "start",
]

Stdin = Union[bytes, str, None]
_Reply = tuple[int, bytes, bytes]


# -- calling the binary ---------------------------------------------------


def _call(argv: list[str], data: bytes | None, *, abort: bool) -> _Reply:
    """Runs dsh-exec to its end. When the wait is interrupted (Ctrl-C, any
    exception), a run (``abort``) gets SIGTERM, dsh-exec's abort: it ends
    the command's whole tree, and is awaited; a client subcommand is
    killed."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = proc.communicate(data)
    except BaseException:
        _stop(proc, abort)
        raise
    return proc.returncode, out, err


def _stop(proc: subprocess.Popen[bytes], abort: bool) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM if abort else signal.SIGKILL)
    try:
        proc.communicate()
    except BaseException:
        # Interrupted again: a second SIGTERM makes dsh-exec SIGKILL the
        # tree at once; stop reading so that it cannot block on its reply.
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM if abort else signal.SIGKILL)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
        raise


async def _acall(argv: list[str], data: bytes | None, *, abort: bool) -> _Reply:
    """The asyncio form of _call: a cancelled caller sends dsh-exec SIGTERM
    (a run: its abort, which ends the command's tree with SIGTERM, grace,
    SIGKILL), awaits its exit, and re-raises CancelledError."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = await proc.communicate(data)
    except BaseException:
        await _astop(proc, abort)
        raise
    assert proc.returncode is not None
    return proc.returncode, out, err


async def _astop(proc: asyncio.subprocess.Process, abort: bool) -> None:
    sig = signal.SIGTERM if abort else signal.SIGKILL
    if proc.stdin is not None:
        proc.stdin.close()
    for attempt in (1, 2):
        if proc.returncode is None:
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
        try:
            # Read its reply to the end so that it cannot block writing it.
            await asyncio.gather(_drain(proc.stdout), _drain(proc.stderr), proc.wait())
            return
        except asyncio.CancelledError:
            # Cancelled again while it aborts: the second SIGTERM makes
            # dsh-exec SIGKILL the tree at once; a third cancellation
            # leaves it to finish that on its own.
            if attempt == 2:
                raise


async def _drain(stream: asyncio.StreamReader | None) -> None:
    if stream is not None:
        while await stream.read(65536):
            pass


def _run_argv(command: Command, flags: list[str], data: bytes | None, *lead: str) -> list[str]:
    argv = [find_binary(), *lead, "--json", *flags]
    if data is not None:
        argv += ["--stdin-file", "-"]
    return [*argv, "--", *command_words(command)]


def _as_result(reply: _Reply) -> RunResult:
    value = reply_object(*reply)
    if not isinstance(value, dict) or "command" not in value:
        raise DshExecError(
            "NO_REPLY", f"dsh-exec printed no result: {value!r}", exit_status=reply[0]
        )
    return _with_warnings(RunResult.from_json(value), reply[2])


_WARNING = "dsh-exec: warning: "


def _warnings(stderr: bytes) -> tuple[str, ...]:
    lines = stderr.decode("utf-8", "replace").splitlines()
    return tuple(line[len(_WARNING) :] for line in lines if line.startswith(_WARNING))


def _with_warnings(result: RunResult, stderr: bytes) -> RunResult:
    warnings = _warnings(stderr)
    return dataclasses.replace(result, warnings=warnings) if warnings else result


# -- run ------------------------------------------------------------------


def run(
    command: Command,
    *,
    workdir: StrPath | None = None,
    timeout: Duration | None = None,
    idle_timeout: Duration | None = None,
    sandbox: str | None = None,
    network: str | None = None,
    writable_roots: Iterable[StrPath] = (),
    env: Mapping[str, str | None] | None = None,
    stdin: Stdin = None,
    stdout_max_bytes: Size | None = None,
    stderr_max_bytes: Size | None = None,
    kill_after: Duration | None = None,
    transaction: bool = False,
    on_exit: str | None = None,
    extra_args: Iterable[str] = (),
) -> RunResult:
    """Runs one command through ``dsh-exec --json`` and returns its result.

    ``command``: a str is one script for ``bash -c``; a sequence of words
    is passed as several words, which dsh-exec shell-quotes and joins.
    ``timeout``, ``idle_timeout`` and ``kill_after``: seconds or a
    timedelta (whole milliseconds; a timeout of 0 means no deadline), or a
    duration string. ``idle_timeout`` ends the run as at the deadline when
    stdout and stderr both stay silent that long (``timeout_kind`` is then
    ``"idle"``).
    ``env``: ``-e KEY=VALUE`` each (a None value: ``-e KEY``, passed through).
    ``stdin``: bytes or str fed to the command (``--stdin-file -``); else
    its stdin is closed. ``transaction``: ``--transaction`` (root, or
    CAP_SYS_ADMIN; implies workspace-write): the writable roots run on
    overlays, ``result.transaction`` lists every change, and commit(),
    discard() or diff() decide later; ``on_exit``: ``--on-exit`` (``commit``,
    ``discard`` or ``keep``). ``extra_args``: more dsh-exec options, as given.
    Unset options take dsh-exec's defaults (and its configuration file's).

    A nonzero exit, a timeout, an abort or a denial is a result; only
    dsh-exec's own failures raise DshExecError.
    """
    flags = run_flags(
        workdir=workdir, timeout=timeout, idle_timeout=idle_timeout, sandbox=sandbox,
        network=network,
        writable_roots=writable_roots, env=env, stdout_max_bytes=stdout_max_bytes,
        stderr_max_bytes=stderr_max_bytes, kill_after=kill_after, extra_args=extra_args,
        transaction=transaction, on_exit=on_exit,
    )  # fmt: skip
    data = stdin_bytes(stdin)
    return _as_result(_call(_run_argv(command, flags, data), data, abort=True))


async def arun(
    command: Command,
    *,
    workdir: StrPath | None = None,
    timeout: Duration | None = None,
    idle_timeout: Duration | None = None,
    sandbox: str | None = None,
    network: str | None = None,
    writable_roots: Iterable[StrPath] = (),
    env: Mapping[str, str | None] | None = None,
    stdin: Stdin = None,
    stdout_max_bytes: Size | None = None,
    stderr_max_bytes: Size | None = None,
    kill_after: Duration | None = None,
    transaction: bool = False,
    on_exit: str | None = None,
    extra_args: Iterable[str] = (),
) -> RunResult:
    """run() on an asyncio subprocess. A task cancelled while it waits sends
    dsh-exec SIGTERM (its abort: the command's whole tree gets SIGTERM, then
    SIGKILL after the grace period), awaits dsh-exec's exit, and re-raises
    CancelledError; a second cancellation meanwhile makes the SIGKILL
    immediate."""
    flags = run_flags(
        workdir=workdir, timeout=timeout, idle_timeout=idle_timeout, sandbox=sandbox,
        network=network,
        writable_roots=writable_roots, env=env, stdout_max_bytes=stdout_max_bytes,
        stderr_max_bytes=stderr_max_bytes, kill_after=kill_after, extra_args=extra_args,
        transaction=transaction, on_exit=on_exit,
    )  # fmt: skip
    data = stdin_bytes(stdin)
    return _as_result(await _acall(_run_argv(command, flags, data), data, abort=True))


# -- explain --------------------------------------------------------------


def _as_explanation(reply: _Reply) -> dict[str, Any]:
    value = reply_object(*reply)
    if not isinstance(value, dict):
        raise DshExecError(
            "NO_REPLY", f"dsh-exec explain printed no object: {value!r}", exit_status=reply[0]
        )
    return value


def explain(
    command: Command,
    *,
    workdir: StrPath | None = None,
    timeout: Duration | None = None,
    idle_timeout: Duration | None = None,
    sandbox: str | None = None,
    network: str | None = None,
    writable_roots: Iterable[StrPath] = (),
    env: Mapping[str, str | None] | None = None,
    stdout_max_bytes: Size | None = None,
    stderr_max_bytes: Size | None = None,
    kill_after: Duration | None = None,
    transaction: bool = False,
    on_exit: str | None = None,
    extra_args: Iterable[str] = (),
) -> dict[str, Any]:
    """The resolved spec, environment and confinement of a run, as
    ``dsh-exec explain --json`` prints it (schema/explain.schema.json);
    nothing is run."""
    flags = run_flags(
        workdir=workdir, timeout=timeout, idle_timeout=idle_timeout, sandbox=sandbox,
        network=network,
        writable_roots=writable_roots, env=env, stdout_max_bytes=stdout_max_bytes,
        stderr_max_bytes=stderr_max_bytes, kill_after=kill_after, extra_args=extra_args,
        transaction=transaction, on_exit=on_exit,
    )  # fmt: skip
    argv = [find_binary(), "explain", "--json", *flags, "--", *command_words(command)]
    return _as_explanation(_call(argv, None, abort=False))


async def aexplain(
    command: Command,
    *,
    workdir: StrPath | None = None,
    timeout: Duration | None = None,
    idle_timeout: Duration | None = None,
    sandbox: str | None = None,
    network: str | None = None,
    writable_roots: Iterable[StrPath] = (),
    env: Mapping[str, str | None] | None = None,
    stdout_max_bytes: Size | None = None,
    stderr_max_bytes: Size | None = None,
    kill_after: Duration | None = None,
    transaction: bool = False,
    on_exit: str | None = None,
    extra_args: Iterable[str] = (),
) -> dict[str, Any]:
    """explain() on an asyncio subprocess."""
    flags = run_flags(
        workdir=workdir, timeout=timeout, idle_timeout=idle_timeout, sandbox=sandbox,
        network=network,
        writable_roots=writable_roots, env=env, stdout_max_bytes=stdout_max_bytes,
        stderr_max_bytes=stderr_max_bytes, kill_after=kill_after, extra_args=extra_args,
        transaction=transaction, on_exit=on_exit,
    )  # fmt: skip
    argv = [find_binary(), "explain", "--json", *flags, "--", *command_words(command)]
    return _as_explanation(await _acall(argv, None, abort=False))


# -- background jobs ------------------------------------------------------


def _start_argv(
    command: Command, flags: list[str], data: bytes | None, stdin_pipe: bool
) -> list[str]:
    if stdin_pipe:
        flags = [*flags, "--stdin", "pipe"]
    return _run_argv(command, flags, data, "--background")


def _started(reply: _Reply) -> tuple[str, int, str, tuple[str, ...]]:
    value = reply_object(*reply)
    if not isinstance(value, dict) or "job_id" not in value:
        raise DshExecError(
            "NO_REPLY", f"dsh-exec --background printed no job: {value!r}", exit_status=reply[0]
        )
    return (
        str(value["job_id"]),
        int(value.get("pid", 0)),
        str(value.get("dir", "")),
        _warnings(reply[2]),
    )


def _read_reply(reply: _Reply) -> JobRead:
    value = reply_object(*reply)
    if not isinstance(value, dict):
        raise DshExecError(
            "NO_REPLY", f"dsh-exec job read printed no object: {value!r}", exit_status=reply[0]
        )
    return JobRead.from_json(value)


def _wait_argv(job_id: str, timeout: Duration | None) -> list[str]:
    argv = [find_binary(), "job", "wait", "--json"]
    if timeout is not None:
        argv += ["--timeout", duration("timeout", timeout)]
    return [*argv, "--", job_id]


def _wait_reply(job_id: str, reply: _Reply) -> RunResult | None:
    value = reply_object(*reply)
    if isinstance(value, dict) and "command" in value:
        return RunResult.from_json(value)
    status = value.get("status") if isinstance(value, dict) else None
    if status == "running":
        return None
    if status == "lost":
        raise DshExecError(
            "JOB_LOST",
            f"job {job_id} is lost: its supervisor ended without a result",
            exit_status=reply[0],
            stderr=reply[2].decode("utf-8", "replace"),
        )
    raise DshExecError("NO_REPLY", f"dsh-exec job wait printed {value!r}", exit_status=reply[0])


def _write_argv(job_id: str, data: bytes, timeout: Duration | None) -> list[str]:
    """``job write``: the data from this process's stdin, as it is (no
    escapes); without data, ``--close``."""
    argv = [find_binary(), "job", "write"]
    if timeout is not None:
        argv += ["--timeout", duration("timeout", timeout)]
    if not data:
        argv.append("--close")
    argv += ["--", job_id]
    if data:
        argv.append("-")
    return argv


# `job write --close` on a job that has ended: its stdin is closed already.
_CLOSED_BY_ITS_END = re.compile(r"^dsh-exec: job \S+ is not running \(0 bytes written\)$")


def _write_reply(reply: _Reply, closing: bool) -> None:
    status, _, err = reply
    if status == 0:
        return
    if status == 1:
        text = err.decode("utf-8", "replace").strip()
        if closing and _CLOSED_BY_ITS_END.match(text):
            return
        raise DshExecError(
            "JOB_WRITE_REFUSED", text.removeprefix("dsh-exec: "), exit_status=status, stderr=text
        )
    raise error_from_stderr(status, err, default_code="NO_REPLY")


def _kill_reply(reply: _Reply) -> bool:
    status, _, err = reply
    if status == 0:
        return True
    if status == 1:
        return False
    raise error_from_stderr(status, err, default_code="NO_REPLY")


class _JobBase:
    __slots__ = ("id", "pid", "dir", "warnings")

    def __init__(self, job_id: str, pid: int, dir: str, warnings: tuple[str, ...] = ()) -> None:
        self.id = job_id
        """The job's id (``dsh-exec job read ID`` in a shell follows it too)."""
        self.pid = pid
        """The command's pid (its bash; 0 when it never ran)."""
        self.dir = dir
        """The job's state directory."""
        self.warnings = warnings
        """What dsh-exec warned of on stderr as it started the job."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, pid={self.pid})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _JobBase) and type(other) is type(self) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)


class Job(_JobBase):
    """A background job started by start(); each method calls ``dsh-exec job``."""

    __slots__ = ()

    def read(self) -> JobRead:
        """The output since the previous read (consuming), the status, and
        the result once finished (``job read --json``)."""
        return _read_reply(
            _call([find_binary(), "job", "read", "--json", "--", self.id], None, abort=False)
        )

    def write(
        self, data: bytes | str, close: bool = False, *, timeout: Duration | None = None
    ) -> None:
        """Appends ``data`` (exact bytes; a str is UTF-8) to the stdin of a
        job started with ``stdin_pipe=True``, then closes it if ``close``
        (``job write``). Raises DshExecError ``JOB_WRITE_REFUSED`` when the
        job cannot take it (not running, no pipe, the command closed its
        stdin, or nothing taken for ``timeout``, 10 s by default)."""
        raw = stdin_bytes(data) or b""
        # Two calls: `job write ID - --close` fails as "not running (0 bytes
        # written)" when the command took the data and ended before the close.
        if raw:
            _write_reply(_call(_write_argv(self.id, raw, timeout), raw, abort=False), False)
        if close:
            _write_reply(_call(_write_argv(self.id, b"", timeout), None, abort=False), True)

    def wait(self, timeout: Duration | None = None) -> RunResult | None:
        """Blocks until the job ends and returns its result; None when
        ``timeout`` passed first (the job keeps running). Raises
        DshExecError ``JOB_LOST`` for a job whose supervisor died."""
        return _wait_reply(self.id, _call(_wait_argv(self.id, timeout), None, abort=False))

    def kill(self) -> bool:
        """Kills the job's whole tree (SIGTERM, grace, SIGKILL); False when
        it had already ended. Run as root, a job's shell is the init of its
        own PID namespace and ignores SIGTERM, so this takes the grace
        period (``kill_after``, 2 s by default) unless the command handles
        SIGTERM itself (docs/jobs.md)."""
        return _kill_reply(_call([find_binary(), "job", "kill", "--", self.id], None, abort=False))


class AsyncJob(_JobBase):
    """A background job started by astart(): Job's methods as coroutines."""

    __slots__ = ()

    async def read(self) -> JobRead:
        return _read_reply(
            await _acall([find_binary(), "job", "read", "--json", "--", self.id], None, abort=False)
        )

    async def write(
        self, data: bytes | str, close: bool = False, *, timeout: Duration | None = None
    ) -> None:
        raw = stdin_bytes(data) or b""
        if raw:
            _write_reply(await _acall(_write_argv(self.id, raw, timeout), raw, abort=False), False)
        if close:
            _write_reply(await _acall(_write_argv(self.id, b"", timeout), None, abort=False), True)

    async def wait(self, timeout: Duration | None = None) -> RunResult | None:
        return _wait_reply(self.id, await _acall(_wait_argv(self.id, timeout), None, abort=False))

    async def kill(self) -> bool:
        return _kill_reply(
            await _acall([find_binary(), "job", "kill", "--", self.id], None, abort=False)
        )


def start(
    command: Command,
    *,
    workdir: StrPath | None = None,
    timeout: Duration | None = None,
    idle_timeout: Duration | None = None,
    sandbox: str | None = None,
    network: str | None = None,
    writable_roots: Iterable[StrPath] = (),
    env: Mapping[str, str | None] | None = None,
    stdin: Stdin = None,
    stdin_pipe: bool = False,
    stdout_max_bytes: Size | None = None,
    stderr_max_bytes: Size | None = None,
    kill_after: Duration | None = None,
    transaction: bool = False,
    on_exit: str | None = None,
    extra_args: Iterable[str] = (),
) -> Job:
    """Starts the command as a background job (``--background --json``).

    The options are run()'s; a job has no deadline unless ``timeout`` (or
    the configuration file) gives one. ``stdin_pipe=True`` keeps its stdin
    open for Job.write (``--stdin pipe``)."""
    flags = run_flags(
        workdir=workdir, timeout=timeout, idle_timeout=idle_timeout, sandbox=sandbox,
        network=network,
        writable_roots=writable_roots, env=env, stdout_max_bytes=stdout_max_bytes,
        stderr_max_bytes=stderr_max_bytes, kill_after=kill_after, extra_args=extra_args,
        transaction=transaction, on_exit=on_exit,
    )  # fmt: skip
    data = stdin_bytes(stdin)
    return Job(*_started(_call(_start_argv(command, flags, data, stdin_pipe), data, abort=False)))


async def astart(
    command: Command,
    *,
    workdir: StrPath | None = None,
    timeout: Duration | None = None,
    idle_timeout: Duration | None = None,
    sandbox: str | None = None,
    network: str | None = None,
    writable_roots: Iterable[StrPath] = (),
    env: Mapping[str, str | None] | None = None,
    stdin: Stdin = None,
    stdin_pipe: bool = False,
    stdout_max_bytes: Size | None = None,
    stderr_max_bytes: Size | None = None,
    kill_after: Duration | None = None,
    transaction: bool = False,
    on_exit: str | None = None,
    extra_args: Iterable[str] = (),
) -> AsyncJob:
    """start() on an asyncio subprocess; the job's methods are coroutines."""
    flags = run_flags(
        workdir=workdir, timeout=timeout, idle_timeout=idle_timeout, sandbox=sandbox,
        network=network,
        writable_roots=writable_roots, env=env, stdout_max_bytes=stdout_max_bytes,
        stderr_max_bytes=stderr_max_bytes, kill_after=kill_after, extra_args=extra_args,
        transaction=transaction, on_exit=on_exit,
    )  # fmt: skip
    data = stdin_bytes(stdin)
    return AsyncJob(
        *_started(await _acall(_start_argv(command, flags, data, stdin_pipe), data, abort=False))
    )


# -- transactions ---------------------------------------------------------


def _transaction_id(id: str) -> str:
    if not isinstance(id, str):
        raise TypeError(f"id: expected a transaction id (str), got {type(id).__name__}")
    return id


def _commit_argv(id: str, atomic: bool, force: bool) -> list[str]:
    for name, value in (("atomic", atomic), ("force", force)):
        if not isinstance(value, bool):
            raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    argv = [find_binary(), "commit", "--json"]
    if atomic:
        argv.append("--atomic")
    if force:
        argv.append("--force")
    return [*argv, "--", _transaction_id(id)]


def _committed(reply: _Reply) -> CommitReport:
    value = reply_object(*reply)
    if not isinstance(value, dict) or "applied" not in value:
        raise DshExecError(
            "NO_REPLY", f"dsh-exec commit printed no report: {value!r}", exit_status=reply[0]
        )
    return CommitReport.from_json(value)


def _discard_argv(id: str) -> list[str]:
    return [find_binary(), "discard", "--", _transaction_id(id)]


def _diff_argv(id: str, paths: tuple[StrPath, ...]) -> list[str]:
    for path in paths:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"paths: expected paths, got {type(path).__name__}")
    return [find_binary(), "diff", "--", _transaction_id(id), *(os.fspath(p) for p in paths)]


def _text_reply(reply: _Reply) -> str:
    status, out, err = reply
    if status != 0:
        raise error_from_stderr(status, err, default_code="NO_REPLY")
    return out.decode("utf-8", "replace")


def commit(id: str, atomic: bool = False, force: bool = False) -> CommitReport:
    """Applies transaction ``id`` (a result's ``transaction.id``) to the
    real roots (``dsh-exec commit --json``): a path changed meanwhile in the
    real tree, or protected, is refused and listed in ``refused``, the rest
    applied, and the refused stay pending (``state``); ``atomic=True``
    applies nothing when any would be refused; ``force=True`` applies paths
    changed meanwhile too (never protected ones). Raises DshExecError
    ``TRANSACTION_FAILED`` for an unknown, decided or running id, or a
    root that is no longer the directory it ran on."""
    return _committed(_call(_commit_argv(id, atomic, force), None, abort=False))


def discard(id: str) -> None:
    """Throws transaction ``id`` away (``dsh-exec discard``); the real roots
    stay as they are. Raises DshExecError ``TRANSACTION_FAILED`` for an
    unknown or decided id."""
    _text_reply(_call(_discard_argv(id), None, abort=False))


def diff(id: str, *paths: StrPath) -> str:
    """Transaction ``id``'s changes (``dsh-exec diff``): a unified diff of
    the text files, a line for each other change; only those at or under
    ``paths`` when given (relative ones taken from this process's current
    directory). Raises DshExecError ``TRANSACTION_FAILED`` for an unknown
    or decided id."""
    return _text_reply(_call(_diff_argv(id, paths), None, abort=False))


async def acommit(id: str, atomic: bool = False, force: bool = False) -> CommitReport:
    """commit() on an asyncio subprocess."""
    return _committed(await _acall(_commit_argv(id, atomic, force), None, abort=False))


async def adiscard(id: str) -> None:
    """discard() on an asyncio subprocess."""
    _text_reply(await _acall(_discard_argv(id), None, abort=False))


async def adiff(id: str, *paths: StrPath) -> str:
    """diff() on an asyncio subprocess."""
    return _text_reply(await _acall(_diff_argv(id, paths), None, abort=False))
