"""events() and aevents(): a run's events as they happen (``dsh-exec --events``).

Each NDJSON line dsh-exec prints becomes one typed, frozen event; the last
is always an ExitEvent with the whole RunResult (schema/event.schema.json).
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union

from ._binary import find_binary
from ._cli import (
    Command,
    DshExecError,
    Duration,
    Size,
    StrPath,
    command_words,
    error_from_stderr,
    run_flags,
    stdin_bytes,
)
from ._results import Denial, RunResult

Stdin = Union[bytes, str, None]

__all__ = [
    "Event",
    "ExitEvent",
    "LimitEvent",
    "NoticeEvent",
    "OutputEvent",
    "StartEvent",
    "DenialEvent",
    "DroppedEvent",
    "aevents",
    "events",
]


@dataclass(frozen=True)
class StartEvent:
    """The command was spawned: the resolved spec's summary."""

    command: str
    workdir: str
    pid: int
    timeout_ms: int | None
    idle_timeout_ms: int | None
    stdout_max_bytes: int
    stderr_max_bytes: int
    sandbox: str | None
    network: str | None


@dataclass(frozen=True)
class OutputEvent:
    """A chunk of output: ``stream`` is ``stdout`` or ``stderr``."""

    stream: str
    data: bytes
    """The exact bytes (decoded from base64 where dsh-exec sent them so)."""

    @property
    def text(self) -> str:
        """The bytes as text (invalid UTF-8 replaced)."""
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class NoticeEvent:
    """A warning of the preparation, or a value a cap lowered."""

    text: str


@dataclass(frozen=True)
class DroppedEvent:
    """Output the events could not carry (a consumer slower than the
    command): ``bytes`` of ``stream`` since its previous DroppedEvent. The
    result's tail and spill file still hold them."""

    stream: str
    bytes: int


@dataclass(frozen=True)
class DenialEvent:
    """A refusal of the sandbox, as in ``result.sandbox.denials`` (sent when
    the run has ended)."""

    denial: Denial


@dataclass(frozen=True)
class LimitEvent:
    """The resource limit the run reached: ``memory``, ``cpu``, ``pids`` or
    ``file_size`` (sent when the run has ended)."""

    kind: str


@dataclass(frozen=True)
class ExitEvent:
    """The run has ended; always the last event."""

    result: RunResult


Event = Union[
    StartEvent, OutputEvent, NoticeEvent, DroppedEvent, DenialEvent, LimitEvent, ExitEvent
]


def _event(line: bytes, stderr: bytes) -> Event | None:
    """The event of one NDJSON line; raises DshExecError for an ``error``
    event; None for a kind this module does not know (a newer dsh-exec)."""
    value: Mapping[str, Any] = json.loads(line)
    kind = value.get("event")
    if kind == "start":
        fields = {k: v for k, v in value.items() if k != "event"}
        return StartEvent(**{k: fields.get(k) for k in StartEvent.__dataclass_fields__})
    if kind in ("stdout", "stderr"):
        text = str(value.get("text", ""))
        data = base64.b64decode(text) if value.get("encoding") == "base64" else text.encode()
        return OutputEvent(kind, data)
    if kind == "notice":
        return NoticeEvent(str(value.get("text", "")))
    if kind == "dropped":
        return DroppedEvent(str(value.get("stream", "")), int(value.get("bytes", 0)))
    if kind == "denial":
        return DenialEvent(Denial.from_json({k: v for k, v in value.items() if k != "event"}))
    if kind == "limit":
        return LimitEvent(str(value.get("kind", "")))
    if kind == "exit":
        return ExitEvent(RunResult.from_json(value["result"]))
    if kind == "error":
        raise DshExecError(
            str(value.get("code", "")),
            str(value.get("message", "")),
            exit_status=125,
            stderr=stderr.decode("utf-8", "replace"),
        )
    return None


async def _lines(stream: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The lines of ``stream``, however long (StreamReader.readline stops
    at its buffer limit; an ``exit`` event carries the whole result)."""
    held = bytearray()
    while chunk := await stream.read(1 << 20):
        held += chunk
        while (end := held.find(b"\n")) >= 0:
            yield bytes(held[: end + 1])
            del held[: end + 1]
    if held:
        yield bytes(held)


def _argv(command: Command, flags: list[str], data: bytes | None) -> list[str]:
    argv = [find_binary(), "--events", *flags]
    if data is not None:
        argv += ["--stdin-file", "-"]
    return [*argv, "--", *command_words(command)]


def events(
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
    extra_args: Iterable[str] = (),
) -> Iterator[Event]:
    """Runs one command as run() does and yields its events as they happen:
    StartEvent, NoticeEvents, OutputEvents (at most 20 a second per stream;
    a DroppedEvent counts what a consumer too slow for the command missed),
    DenialEvents and a LimitEvent when the run has ended, and last an
    ExitEvent with the result. The options are run()'s.

    Leaving the loop early (``break``, an exception, the generator closed)
    aborts the run as Ctrl-C would: dsh-exec gets SIGTERM and ends the
    command's whole tree, and is awaited. dsh-exec's own failures raise
    DshExecError."""
    flags = run_flags(
        workdir=workdir, timeout=timeout, idle_timeout=idle_timeout, sandbox=sandbox,
        network=network, writable_roots=writable_roots, env=env,
        stdout_max_bytes=stdout_max_bytes, stderr_max_bytes=stderr_max_bytes,
        kill_after=kill_after, extra_args=extra_args,
    )  # fmt: skip
    data = stdin_bytes(stdin)
    proc = subprocess.Popen(
        _argv(command, flags, data),
        stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    ended = False
    try:
        if proc.stdin is not None and data is not None:
            # dsh-exec reads all of --stdin-file - before the command starts;
            # one that failed first (a bad workdir) says why on stdout.
            try:
                proc.stdin.write(data)
                proc.stdin.close()
            except BrokenPipeError:
                pass
        assert proc.stdout is not None
        for line in proc.stdout:
            event = _event(line, b"")
            if event is None:
                continue
            if isinstance(event, ExitEvent):
                ended = True
            yield event
        proc.wait()
        if not ended:
            stderr = proc.stderr.read() if proc.stderr is not None else b""
            raise error_from_stderr(proc.returncode, stderr, default_code="NO_REPLY")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


async def aevents(
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
    extra_args: Iterable[str] = (),
) -> AsyncIterator[Event]:
    """events() on an asyncio subprocess (``async for ev in aevents(...)``);
    a cancelled task or a loop left early aborts the run as events() does."""
    flags = run_flags(
        workdir=workdir, timeout=timeout, idle_timeout=idle_timeout, sandbox=sandbox,
        network=network, writable_roots=writable_roots, env=env,
        stdout_max_bytes=stdout_max_bytes, stderr_max_bytes=stderr_max_bytes,
        kill_after=kill_after, extra_args=extra_args,
    )  # fmt: skip
    data = stdin_bytes(stdin)
    proc = await asyncio.create_subprocess_exec(
        *_argv(command, flags, data),
        stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    ended = False
    try:
        if proc.stdin is not None and data is not None:
            try:
                proc.stdin.write(data)
                await proc.stdin.drain()
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass
        assert proc.stdout is not None
        async for line in _lines(proc.stdout):
            event = _event(line, b"")
            if event is None:
                continue
            if isinstance(event, ExitEvent):
                ended = True
            yield event
        await proc.wait()
        if not ended:
            stderr = await proc.stderr.read() if proc.stderr is not None else b""
            raise error_from_stderr(proc.returncode or 0, stderr, default_code="NO_REPLY")
    finally:
        if proc.returncode is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            await proc.communicate()
