"""events()/aevents(): a run's events as typed values, in order, and the
idle deadline."""

from __future__ import annotations

import asyncio
import random
import time

import dsh_exec

from conftest import processes_with_arg


def test_events_come_in_order_and_end_with_the_result() -> None:
    got = list(dsh_exec.events("echo out; sleep 0.2; printf '\\xff\\n' >&2; exit 3"))
    kinds = [type(e).__name__ for e in got]
    assert kinds == ["StartEvent", "OutputEvent", "OutputEvent", "ExitEvent"]
    start = got[0]
    assert isinstance(start, dsh_exec.StartEvent)
    assert start.command == "echo out; sleep 0.2; printf '\\xff\\n' >&2; exit 3"
    assert start.pid > 1
    assert got[1] == dsh_exec.OutputEvent("stdout", b"out\n")
    assert got[2] == dsh_exec.OutputEvent("stderr", b"\xff\n")
    end = got[3]
    assert isinstance(end, dsh_exec.ExitEvent)
    assert end.result.exit_code == 3
    assert end.result.stdout.text == "out\n"


def test_a_sandbox_denial_is_an_event(tmp_path) -> None:
    got = list(
        dsh_exec.events(
            "echo x > /etc/dsh-exec-pytest-denied",
            workdir=tmp_path,
            sandbox="workspace-write",
        )
    )
    denials = [e.denial for e in got if isinstance(e, dsh_exec.DenialEvent)]
    end = got[-1]
    assert isinstance(end, dsh_exec.ExitEvent)
    assert end.result.sandbox is not None
    assert tuple(denials) == tuple(end.result.sandbox.denials)
    assert denials[0].path == "/etc/dsh-exec-pytest-denied"


def test_leaving_the_loop_early_ends_the_commands_tree() -> None:
    marker = f"1000.{random.randrange(10**8, 10**9)}"
    stream = dsh_exec.events(f"echo up; sleep {marker}")
    for event in stream:
        if isinstance(event, dsh_exec.OutputEvent):
            # bash starts the sleep right after the echo.
            deadline = time.monotonic() + 5
            while not processes_with_arg(marker) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert processes_with_arg(marker)
            break
    stream.close()
    deadline = time.monotonic() + 5
    while processes_with_arg(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes_with_arg(marker)


def test_aevents_and_the_idle_deadline() -> None:
    async def main() -> list[dsh_exec.Event]:
        return [e async for e in dsh_exec.aevents("echo a; sleep 30", idle_timeout=0.3)]

    started = time.monotonic()
    got = asyncio.run(main())
    assert time.monotonic() - started < 10
    end = got[-1]
    assert isinstance(end, dsh_exec.ExitEvent)
    assert end.result.timed_out
    assert end.result.timeout_kind == "idle"
    assert end.result.idle_timeout_ms == 300
    assert dsh_exec.OutputEvent("stdout", b"a\n") in got


def test_run_with_an_idle_timeout() -> None:
    result = dsh_exec.run("sleep 30", idle_timeout=0.2)
    assert (result.timed_out, result.timeout_kind, result.idle_timeout_ms) == (True, "idle", 200)
    assert dsh_exec.run("true").timeout_kind is None


def test_aevents_takes_an_exit_event_larger_than_asyncio_s_line_limit() -> None:
    # The exit event's line holds the 2 MB tail: far past StreamReader's
    # 64 KiB line limit.
    async def main() -> list[dsh_exec.Event]:
        command = "head -c 2000000 /dev/zero | tr '\\0' a"
        return [e async for e in dsh_exec.aevents(command, stdout_max_bytes="2M")]

    got = asyncio.run(main())
    end = got[-1]
    assert isinstance(end, dsh_exec.ExitEvent)
    assert end.result.stdout.text == "a" * 2_000_000


def test_a_failure_with_stdin_given_is_dsh_exec_s_error_not_a_broken_pipe() -> None:
    import pytest

    with pytest.raises(dsh_exec.DshExecError) as caught:
        list(dsh_exec.events("cat", stdin=b"x" * 10_000_000, workdir="/nonexistent/dir"))
    assert caught.value.code == "WORKDIR_UNUSABLE"

    async def main() -> None:
        stdin = b"x" * 10_000_000
        async for _ in dsh_exec.aevents("cat", stdin=stdin, workdir="/nonexistent/dir"):
            pass

    with pytest.raises(dsh_exec.DshExecError) as caught:
        asyncio.run(main())
    assert caught.value.code == "WORKDIR_UNUSABLE"
