"""Shared setup: the tests drive the dsh-exec binary of the installed wheel
(or $DSH_EXEC_BIN), with job state and spill files in a directory of
their own."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_state() -> Iterator[Path]:
    """XDG_STATE_HOME for the session: jobs and spill files land here, not
    in ~/.local/state. (XDG_RUNTIME_DIR would win over it, so it goes.)"""
    state = Path(tempfile.mkdtemp(prefix="dsh-exec-pytest-state-"))
    saved = {name: os.environ.get(name) for name in ("XDG_STATE_HOME", "XDG_RUNTIME_DIR")}
    os.environ["XDG_STATE_HOME"] = str(state)
    os.environ.pop("XDG_RUNTIME_DIR", None)
    try:
        yield state
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(state, ignore_errors=True)


def processes_with_arg(arg: str) -> set[int]:
    """Pids of the live processes one of whose arguments is exactly ``arg``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if arg.encode() in words:
            found.add(int(entry.name))
    return found
