"""Background jobs: start(), Job.write/read/wait/kill."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import dsh_exec


def read_until(job: dsh_exec.Job, want: str, seconds: float = 10.0) -> str:
    """Reads (consuming) until the stdout seen contains ``want``."""
    seen = ""
    deadline = time.monotonic() + seconds
    while want not in seen:
        assert time.monotonic() < deadline, f"no {want!r} in {seen!r}"
        seen += job.read().delta_stdout
        time.sleep(0.05)
    return seen


def test_write_read_wait(tmp_path: Path) -> None:
    job = dsh_exec.start(
        'while IFS= read -r line; do echo "got:$line"; done; echo bye; exit 4',
        workdir=tmp_path,
        stdin_pipe=True,
    )
    assert job.id.startswith("j")
    assert job.pid > 0
    job.write("one\n")
    job.write(b"two \\n\n")  # exact bytes: no escapes applied
    assert read_until(job, "got:two") == "got:one\ngot:two \\n\n"
    reply = job.read()
    assert reply.status == "running"
    assert reply.delta_stdout == ""
    assert reply.result is None
    job.write("", close=True)
    result = job.wait(timeout=10)
    assert result is not None
    assert result.exit_code == 4
    assert result.stdout.text == "got:one\ngot:two \\n\nbye\n"
    assert result.timeout_ms is None  # jobs have no deadline unless given
    final = job.read()
    assert final.status == "finished"
    assert final.delta_stdout == "bye\n"
    assert final.result == result
    assert job.kill() is False  # it had already ended
    with pytest.raises(dsh_exec.DshExecError) as caught:
        job.write("late\n")
    assert caught.value.code == "JOB_WRITE_REFUSED"
    assert caught.value.exit_status == 1
    assert caught.value.message == f"job {job.id} is not running (0 bytes written)"


def test_wait_with_a_timeout_then_kill() -> None:
    job = dsh_exec.start("echo up; sleep 60", kill_after=0.5)
    assert job.wait(timeout=0.3) is None  # still running: no result yet
    read_until(job, "up")
    assert job.kill() is True
    result = job.wait()
    assert result is not None
    assert result.aborted is True
    assert result.aborted_by == "SIGTERM"
    assert result.timed_out is False
    assert result.exit_code is None
    assert result.stdout.text == "up\n"


def test_an_unknown_job_is_a_usage_error() -> None:
    job = dsh_exec.Job("jnosuchjob", 0, "")
    for call in (job.read, job.wait, job.kill):
        with pytest.raises(dsh_exec.DshExecError) as caught:
            call()
        assert caught.value.code == "USAGE"
        assert caught.value.message == "no such job: jnosuchjob"


def test_start_keeps_the_warnings(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    job = dsh_exec.start(
        "echo done", workdir=tmp_path, sandbox="workspace-write", writable_roots=[missing]
    )
    assert job.warnings == (
        f"writable root {missing} skipped: No such file or directory (os error 2)",
    )
    result = job.wait(timeout=10)
    assert result is not None
    assert result.stdout.text == "done\n"
