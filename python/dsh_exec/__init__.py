"""Run one shell command safely and get a typed result: the dsh-exec binary
(deadline, bounded output with spill files, Landlock/seccomp sandbox), from
Python.

Every function calls the binary this package ships (found by
find_binary(): ``$DSH_EXEC_BIN``, the environment's scripts directory, then
``PATH``); nothing here decides policy. See docs/python.md.
"""

from ._api import (
    AsyncJob,
    Job,
    acommit,
    adiff,
    adiscard,
    aexplain,
    arun,
    astart,
    commit,
    diff,
    discard,
    explain,
    run,
    start,
)
from ._binary import find_binary
from ._cli import Command, DshExecError, Duration, Size
from ._events import (
    DenialEvent,
    DroppedEvent,
    Event,
    ExitEvent,
    LimitEvent,
    NoticeEvent,
    OutputEvent,
    StartEvent,
    aevents,
    events,
)
from ._results import (
    Change,
    CommitReport,
    Denial,
    JobRead,
    Limits,
    NetworkDenial,
    NotEnforced,
    ProtectedChange,
    Refusal,
    Resources,
    RunResult,
    Sandbox,
    Stream,
    Transaction,
)

__all__ = [
    "AsyncJob",
    "Change",
    "Command",
    "CommitReport",
    "Denial",
    "DenialEvent",
    "DroppedEvent",
    "DshExecError",
    "Duration",
    "Event",
    "ExitEvent",
    "Job",
    "JobRead",
    "LimitEvent",
    "Limits",
    "NetworkDenial",
    "NotEnforced",
    "NoticeEvent",
    "OutputEvent",
    "ProtectedChange",
    "Refusal",
    "Resources",
    "RunResult",
    "Sandbox",
    "Size",
    "StartEvent",
    "Stream",
    "Transaction",
    "acommit",
    "adiff",
    "adiscard",
    "aevents",
    "aexplain",
    "arun",
    "astart",
    "commit",
    "diff",
    "discard",
    "events",
    "explain",
    "find_binary",
    "run",
    "start",
]
