"""The JSON objects dsh-exec prints, as frozen dataclasses.

One class per object of schema/run-result.schema.json and
schema/job-read.schema.json; python/tests/test_schema.py fails when a
property of a schema has no field here or a field here no property.
Keys a newer dsh-exec adds are kept in ``extra`` (never an error).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Callable, TypeVar

__all__ = [
    "Change",
    "CommitReport",
    "Denial",
    "JobRead",
    "Limits",
    "NetworkDenial",
    "NotEnforced",
    "ProtectedChange",
    "Refusal",
    "Resources",
    "RunResult",
    "Sandbox",
    "Stream",
    "Transaction",
]

T = TypeVar("T")

# Marks the fields that are not schema properties: each class's ``extra``,
# and RunResult.warnings (from dsh-exec's stderr).
_NOT_IN_SCHEMA = {"dsh_exec_not_in_schema": True}


def _extra() -> Any:
    return field(default_factory=dict, compare=False, repr=False, metadata=_NOT_IN_SCHEMA)


def _build(
    cls: type[T],
    data: Mapping[str, Any],
    convert: Mapping[str, Callable[[Any], Any]] | None = None,
) -> T:
    """Builds ``cls`` from a JSON object: known keys (converted where
    ``convert`` says), defaults for keys the object leaves out, the rest
    into ``extra``."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
    convert = convert or {}
    known = {f.name for f in fields(cls) if not f.metadata.get("dsh_exec_not_in_schema")}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        if key in known:
            conv = convert.get(key)
            kwargs[key] = conv(value) if conv is not None and value is not None else value
        else:
            extra[key] = value
    return cls(**kwargs, extra=extra)  # type: ignore[call-arg]


def _tuple_of(conv: Callable[[Any], T]) -> Callable[[Any], tuple[T, ...]]:
    return lambda items: tuple(conv(item) for item in items)


def _strings(items: Any) -> tuple[str, ...]:
    return tuple(items)


@dataclass(frozen=True)
class Stream:
    """What one stream (stdout or stderr) produced (``CollectedOutput``)."""

    text: str
    """The kept text: the tail (``kept`` tail and head+tail) or the head."""
    truncated: bool
    """True when bytes of the stream are not in the kept text."""
    total_bytes: int
    """Bytes the stream produced in all."""
    spill_path: str | None = None
    """The spill file holding the exact full stream, when it outgrew its budget."""
    kept: str = "tail"
    """Which part was kept: ``tail``, ``head`` or ``head+tail``."""
    omitted_bytes: int = 0
    """Bytes in neither ``text`` nor ``head`` (they are in the spill file)."""
    head: str | None = None
    """The kept head of a cut ``head+tail`` stream (``text`` is then the tail)."""
    render: str | None = None
    """``plain`` under ``--render plain``; else absent."""
    spill_error: str | None = None
    """Why writing the spill file failed, when it did."""
    spill_truncated: bool = False
    """The spill file reached ``--spill-max-bytes``: it holds the first bytes only."""
    spill_dropped_bytes: int | None = None
    """Bytes past the spill cap (absent when none)."""
    live_dropped_bytes: int | None = None
    """Bytes ``--stream`` could not show live (absent when none)."""
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Stream:
        return _build(cls, data)


@dataclass(frozen=True)
class Denial:
    """One refusal of the sandbox (``DenialFact``)."""

    op: str
    """What was refused: ``write``, ``chmod``, ``connect``, ``socket``, ..."""
    errno: str
    """The errno the command got, by name (``EACCES``, ``EROFS``, ``EPERM``, ...)."""
    source: str
    """``gate`` (known exactly) or ``output`` (read from the command's output)."""
    path: str | None = None
    """The path, or the address family of a network socket; None when not known."""
    hint: str | None = None
    """What would allow it, when something would: a flag to add."""
    network: bool = False
    """True for a network socket refused under ``--network deny``."""
    count: int = 1
    """How many times this same refusal happened."""
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Denial:
        return _build(cls, data)


@dataclass(frozen=True)
class NetworkDenial:
    """One request the ``--network allow=`` proxy refused."""

    host: str
    """The host asked for (a name, or an address literal)."""
    port: int
    reason: str
    """Why, in one line."""
    count: int
    """How many times the same host, port and reason were refused."""
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NetworkDenial:
        return _build(cls, data)


@dataclass(frozen=True)
class ProtectedChange:
    """A change the command made to a protected path (``ProtectedChangeFact``)."""

    path: str
    change: str
    """``created``, ``modified``, ``removed``, ``replaced``, ``quarantined`` or ``unchecked``."""
    restored: bool
    """True when it was undone."""
    reason: str | None = None
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProtectedChange:
        return _build(cls, data)


@dataclass(frozen=True)
class Sandbox:
    """Sandbox facts of a run (``SandboxFacts``); present when a mode or a
    network policy was asked for."""

    mode: str
    """``read-only``, ``workspace-write`` or ``full-access``."""
    denied: bool
    """True when anything was refused (``denials`` is not empty)."""
    enforcement: str
    """``full`` or ``partial``."""
    network: str
    """``allow``, ``deny``, ``loopback`` or ``allow-list``."""
    network_enforcement: str
    """``full``, ``gate`` or ``none``."""
    runner_failed: bool
    """True when confining the child failed after fork (the command never ran)."""
    denials: tuple[Denial, ...] = ()
    """What was refused, the first 100 (see ``denials_more``)."""
    denials_more: int = 0
    network_denied: bool = False
    read_enforcement: str | None = None
    denials_source: str | None = None
    network_allow: tuple[str, ...] | None = None
    network_proxy: str | None = None
    network_denials: tuple[NetworkDenial, ...] | None = None
    network_denials_more: int | None = None
    network_allowed: Mapping[str, int] | None = None
    credentials_used: Mapping[str, Mapping[str, int]] | None = None
    """Requests a credential was put into (``--credential``/``--inject``
    through ``extra_args``): by credential name, then by host, how many."""
    credentials_missed: Mapping[str, int] | None = None
    """Requests to a host an injection rule names that no rule covered,
    sent without a credential: by host, how many."""
    protected_changes: tuple[ProtectedChange, ...] | None = None
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sandbox:
        return _build(
            cls,
            data,
            {
                "denials": _tuple_of(Denial.from_json),
                "network_allow": _strings,
                "network_denials": _tuple_of(NetworkDenial.from_json),
                "network_allowed": dict,
                "credentials_used": lambda d: {k: dict(v) for k, v in d.items()},
                "credentials_missed": dict,
                "protected_changes": _tuple_of(ProtectedChange.from_json),
            },
        )


@dataclass(frozen=True)
class Resources:
    """What the command's processes used."""

    cpu_user_ms: int
    cpu_system_ms: int
    peak_memory_bytes: int
    source: str
    """Where the figures come from (getrusage, or the cgroup files read)."""
    max_pids: int | None = None
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Resources:
        return _build(cls, data)


@dataclass(frozen=True)
class NotEnforced:
    """A limit asked for but not enforced (``--limits best-effort``), and why."""

    limit: str
    reason: str
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NotEnforced:
        return _build(cls, data)


@dataclass(frozen=True)
class Limits:
    """The limits of a run and how each was enforced (``LimitFacts``)."""

    mechanism: Mapping[str, str]
    """How each limit set is enforced, by limit: ``cgroup-v2``, ``cgroup-v1``,
    ``accounting``, ``rlimit`` or ``none``."""
    memory_max_bytes: int | None = None
    pids_max: int | None = None
    cpu_max_ms: int | None = None
    file_size_max_bytes: int | None = None
    not_enforced: tuple[NotEnforced, ...] | None = None
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Limits:
        return _build(
            cls,
            data,
            {"mechanism": dict, "not_enforced": _tuple_of(NotEnforced.from_json)},
        )


@dataclass(frozen=True)
class Change:
    """One path a transaction's command changed (``Change``)."""

    path: str
    """The path, absolute, as the real root names it."""
    change: str
    """``created``, ``modified`` or ``deleted`` (a rename is a deletion and a creation)."""
    kind: str
    """``file``, ``dir``, ``symlink`` or ``special`` (for a deletion: of the file removed)."""
    size: int | None = None
    """The new size in bytes, for a regular file that exists afterwards."""
    what: tuple[str, ...] = ()
    """For a modification, what differs: ``content``, ``type``, ``mode``,
    ``owner``, ``times``, ``xattrs``, ``target``."""
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        return _build(cls, data, {"what": _strings})


@dataclass(frozen=True)
class Refusal:
    """A path a commit did not apply, and why."""

    path: str
    reason: str
    """``protected path``, ``changed in the real tree after the transaction
    started``, a planted git file put aside, or the operating system's error."""
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Refusal:
        return _build(cls, data)


@dataclass(frozen=True)
class CommitReport:
    """What a commit did: ``commit()``'s reply, and ``on_exit="commit"``'s
    in ``result.transaction.commit``."""

    applied: int
    """Paths written, made or removed in the real tree."""
    refused: tuple[Refusal, ...]
    """Paths not applied (protected, changed meanwhile, put aside, failed)."""
    state: str
    """``committed`` when every change was applied (the transaction is
    gone); ``pending`` when some were refused: they stay in the transaction
    (``diff`` shows them, ``discard`` drops them, ``commit(force=True)``
    applies the conflicting ones), and with ``atomic`` nothing was
    applied."""
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CommitReport:
        return _build(cls, data, {"refused": _tuple_of(Refusal.from_json)})


@dataclass(frozen=True)
class Transaction:
    """A run's transaction (``transaction=True``; ``TransactionFacts``)."""

    id: str
    """The id for commit(), discard() and diff()."""
    state: str
    """``pending``, ``committed`` or ``discarded`` (after ``on_exit``)."""
    changes: tuple[Change, ...]
    """The first 1000 changes, by path (see ``changes_more``)."""
    changes_more: int
    created: int
    """Paths created (all of them, not only those listed)."""
    modified: int
    deleted: int
    commit: CommitReport | None = None
    """What ``on_exit="commit"`` applied and refused; None otherwise."""
    error: str | None = None
    """Why the change set could not be read whole; None when it was."""
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transaction:
        return _build(
            cls,
            data,
            {"changes": _tuple_of(Change.from_json), "commit": CommitReport.from_json},
        )


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run: the ``--json`` object of dsh-exec.

    A nonzero exit, a timeout, an abort or a denial is a result, not an
    exception; ``ok`` says whether the command exited 0 in time.
    """

    command: str
    """The script given to ``bash -c``."""
    workdir: str
    exit_code: int | None
    """Exit code of ``bash``; None when it died from a signal."""
    signal: str | None
    """Name of the signal that killed ``bash`` (e.g. ``SIGKILL``); None on a normal exit."""
    timed_out: bool
    aborted: bool
    timeout_ms: int | None
    duration_ms: int
    stdout: Stream
    stderr: Stream
    sandbox: Sandbox | None = None
    env_scrubbed: tuple[str, ...] = ()
    resources: Resources | None = None
    limit_exceeded: str | None = None
    """``memory``, ``pids``, ``cpu``, ``file_size`` or None."""
    aborted_by: str | None = None
    capped: tuple[str, ...] | None = None
    limits: Limits | None = None
    timeout_kind: str | None = None
    """When ``timed_out``: ``deadline`` (``timeout``) or ``idle``
    (``idle_timeout``: no output for that long); None otherwise."""
    idle_timeout_ms: int | None = None
    """The idle deadline applied, in milliseconds; None when there was none."""
    transaction: Transaction | None = None
    """The run's transaction (``transaction=True``): its id, where it
    stands and every change; None without one."""
    extra: Mapping[str, Any] = _extra()
    warnings: tuple[str, ...] = field(default=(), metadata=_NOT_IN_SCHEMA)
    """What dsh-exec warned of on stderr (``dsh-exec: warning: ...``), one
    line each, e.g. a writable root it skipped: not part of the JSON."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunResult:
        return _build(
            cls,
            data,
            {
                "stdout": Stream.from_json,
                "stderr": Stream.from_json,
                "sandbox": Sandbox.from_json,
                "env_scrubbed": _strings,
                "resources": Resources.from_json,
                "capped": _strings,
                "limits": Limits.from_json,
                "transaction": Transaction.from_json,
            },
        )

    @property
    def ok(self) -> bool:
        """True when the command exited 0, not cut short by a deadline or an abort."""
        return self.exit_code == 0 and not self.timed_out and not self.aborted


@dataclass(frozen=True)
class JobRead:
    """An incremental, consuming read of a background job (``job read --json``)."""

    delta_stdout: str
    """stdout written since the previous read."""
    delta_stderr: str
    """stderr written since the previous read."""
    lossy: bool
    """True when output was dropped before it could be read (the spill files hold it)."""
    status: str | None = None
    """``running``, ``finished`` or ``lost``."""
    stdout_spill_path: str | None = None
    stderr_spill_path: str | None = None
    result: RunResult | None = None
    """The result, once the job has finished."""
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobRead:
        return _build(cls, data, {"result": RunResult.from_json})
