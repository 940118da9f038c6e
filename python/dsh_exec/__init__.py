"""Run one shell command safely and get a typed result: the dsh-exec binary
(deadline, bounded output with spill files, Landlock/seccomp sandbox), from
Python.

Every function calls the binary this package ships (found by
find_binary(): ``$DSH_EXEC_BIN``, the environment's scripts directory, then
``PATH``); nothing here decides policy. See docs/python.md.
"""

from ._api import AsyncJob, Job, aexplain, arun, astart, explain, run, start
from ._binary import find_binary
from ._cli import Command, DshExecError, Duration, Size
from ._results import (
    Denial,
    JobRead,
    Limits,
    NetworkDenial,
    NotEnforced,
    ProtectedChange,
    Resources,
    RunResult,
    Sandbox,
    Stream,
)

__all__ = [
    "AsyncJob",
    "Command",
    "Denial",
    "DshExecError",
    "Duration",
    "Job",
    "JobRead",
    "Limits",
    "NetworkDenial",
    "NotEnforced",
    "ProtectedChange",
    "Resources",
    "RunResult",
    "Sandbox",
    "Size",
    "Stream",
    "aexplain",
    "arun",
    "astart",
    "explain",
    "find_binary",
    "run",
    "start",
]
