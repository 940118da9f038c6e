"""arun/astart, and a run cancelled by its caller."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

import dsh_exec

from conftest import processes_with_arg


def test_arun_result() -> None:
    result = asyncio.run(dsh_exec.arun(["echo", "from asyncio"], stdin=b"unused"))
    assert result.exit_code == 0
    assert result.stdout.text == "from asyncio\n"


def test_concurrent_runs() -> None:
    async def main() -> list:
        return await asyncio.gather(*(dsh_exec.arun(f"sleep 0.3; echo {i}") for i in range(4)))

    started = time.monotonic()
    results = asyncio.run(main())
    assert [r.stdout.text for r in results] == ["0\n", "1\n", "2\n", "3\n"]
    assert time.monotonic() - started < 1.2


def test_cancelled_arun_leaves_no_process_of_its_tree() -> None:
    # Unique sleep durations are the markers: one sleep in the command's
    # group, one that left it with setsid.
    tag = random.randrange(10**8, 10**9)
    in_group, escaped = f"1000.{tag}1", f"1000.{tag}2"

    async def main() -> None:
        task = asyncio.ensure_future(
            dsh_exec.arun(f"setsid sleep {escaped} & sleep {in_group}; wait", kill_after=2)
        )
        deadline = time.monotonic() + 10
        while not (processes_with_arg(in_group) and processes_with_arg(escaped)):
            assert time.monotonic() < deadline, "the command's sleeps never started"
            assert not task.done(), task
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(main())
    # arun returned only after dsh-exec exited, and dsh-exec only after the
    # tree was gone.
    assert processes_with_arg(in_group) == set()
    assert processes_with_arg(escaped) == set()


def test_astart_job() -> None:
    async def main() -> None:
        job = await dsh_exec.astart('read -r x; echo "[$x]"', stdin_pipe=True)
        await job.write("hi\n", close=True)
        result = await job.wait(timeout=10)
        assert result is not None
        assert result.stdout.text == "[hi]\n"
        reply = await job.read()
        assert reply.status == "finished"
        assert await job.kill() is False

    asyncio.run(main())
