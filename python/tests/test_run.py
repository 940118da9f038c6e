"""run() on real commands through the shipped binary."""

from __future__ import annotations

import os
import random
import signal
import sysconfig
import time
from datetime import timedelta
from pathlib import Path

import pytest

import dsh_exec

from conftest import processes_with_arg


def test_the_binary_is_the_one_the_wheel_installed() -> None:
    if os.environ.get("DSH_EXEC_BIN"):
        pytest.skip("DSH_EXEC_BIN names the binary")
    assert dsh_exec.find_binary() == os.path.join(sysconfig.get_path("scripts"), "dsh-exec")


def test_exact_stdout_stderr_and_exit_code(tmp_path: Path) -> None:
    result = dsh_exec.run("echo out; echo err >&2; exit 3", workdir=tmp_path)
    assert result.exit_code == 3
    assert result.signal is None
    assert result.timed_out is False
    assert result.aborted is False
    assert result.ok is False
    assert result.command == "echo out; echo err >&2; exit 3"
    assert result.workdir == str(tmp_path)
    assert result.stdout == dsh_exec.Stream(text="out\n", truncated=False, total_bytes=4)
    assert result.stderr == dsh_exec.Stream(text="err\n", truncated=False, total_bytes=4)
    assert result.sandbox is None
    assert result.timeout_ms == 600_000  # dsh-exec's default deadline


def test_words_are_shell_quoted_by_dsh_exec() -> None:
    result = dsh_exec.run(["printf", "%s|", "a b", "c'd", "$HOME"])
    assert result.command == "printf '%s|' 'a b' \"c'd\" '$HOME'"
    assert result.stdout.text == "a b|c'd|$HOME|"
    assert result.exit_code == 0
    assert result.ok is True


def test_stdin_env_and_durations() -> None:
    result = dsh_exec.run(
        'cat; printf "[%s]" "$GREETING"',
        stdin="line one\nline two\n",
        env={"GREETING": "hello there"},
        timeout=timedelta(seconds=7, milliseconds=250),
        kill_after=0.5,
    )
    assert result.stdout.text == "line one\nline two\n[hello there]"
    assert result.timeout_ms == 7250
    assert dsh_exec.run("true", timeout=0).timeout_ms is None  # 0: no deadline
    assert dsh_exec.run("true", timeout="2m").timeout_ms == 120_000


def test_bytes_stdin_is_passed_exactly() -> None:
    result = dsh_exec.run("od -An -tx1", stdin=b"\x00\xff\n")
    assert result.stdout.text.split() == ["00", "ff", "0a"]


def test_timeout_is_a_result() -> None:
    result = dsh_exec.run("echo started; sleep 30", timeout=0.5, kill_after=0.5)
    assert result.timed_out is True
    assert result.aborted is False
    assert result.exit_code is None
    assert result.signal == "SIGTERM"
    assert result.timeout_ms == 500
    assert 500 <= result.duration_ms < 5000
    assert result.stdout.text == "started\n"
    assert result.ok is False


def test_bounded_output_spills_to_a_file() -> None:
    result = dsh_exec.run("seq 1 20000", stdout_max_bytes=1024)
    assert result.exit_code == 0
    assert result.stdout.truncated is True
    assert result.stdout.total_bytes == 108894
    assert result.stdout.text.endswith("19999\n20000\n")
    assert len(result.stdout.text.encode()) <= 1024
    assert result.stdout.spill_path is not None
    spilled = Path(result.stdout.spill_path).read_text()
    assert spilled == "".join(f"{i}\n" for i in range(1, 20001))


def test_sandbox_denial_is_read_from_the_result(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    outside = tmp_path / "outside"
    workdir.mkdir()
    outside.mkdir()
    target = outside / "note.txt"
    result = dsh_exec.run(
        f"echo in > inside.txt && echo out > {target}",
        workdir=workdir,
        sandbox="workspace-write",
        # The temp dir, which holds tmp_path, is writable in workspace-write
        # unless this says otherwise.
        extra_args=["--no-temp-write"],
    )
    assert result.exit_code == 1
    assert (workdir / "inside.txt").read_text() == "in\n"
    assert not target.exists()
    assert result.stderr.text == f"bash: line 1: {target}: Read-only file system\n"
    sandbox = result.sandbox
    assert sandbox is not None
    assert sandbox.mode == "workspace-write"
    assert sandbox.network == "loopback"
    assert sandbox.denied is True
    assert sandbox.denials_more == 0
    assert sandbox.runner_failed is False
    assert sandbox.denials == (
        dsh_exec.Denial(
            op="write",
            errno="EROFS",
            source="output",
            path=str(target),
            hint=f"--writable-root {outside}",
            network=False,
            count=1,
        ),
    )


def test_a_writable_root_lifts_that_denial(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    result = dsh_exec.run(
        ["sh", "-c", 'echo ok > "$1"', "sh", str(outside / "f")],
        workdir=tmp_path,
        sandbox="workspace-write",
        writable_roots=[outside],
        extra_args=["--no-temp-write"],
    )
    assert result.exit_code == 0
    assert (outside / "f").read_text() == "ok\n"
    assert result.sandbox is not None and result.sandbox.denials == ()


def test_an_unusable_workdir_raises_dsh_exec_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(dsh_exec.DshExecError) as caught:
        dsh_exec.run("true", workdir=missing)
    assert caught.value.code == "WORKDIR_UNUSABLE"
    assert (
        caught.value.message
        == f"working directory {missing}: No such file or directory (os error 2)"
    )
    assert caught.value.exit_status == 125


def test_a_bad_option_is_a_usage_error() -> None:
    with pytest.raises(dsh_exec.DshExecError) as caught:
        dsh_exec.run("true", sandbox="everything")
    assert caught.value.code == "USAGE"
    assert caught.value.exit_status == 125


def test_explain_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "never"
    explanation = dsh_exec.explain(
        f"touch {marker}", workdir=tmp_path, timeout=90, sandbox="read-only"
    )
    assert not marker.exists()
    assert explanation["command"] == f"touch {marker}"
    assert explanation["timeout_ms"] == {"origin": "flag", "value": 90_000}
    assert explanation["workdir"] == {"origin": "flag", "value": str(tmp_path)}
    assert explanation["sandbox"]["mode"] == {"origin": "flag", "value": "read-only"}


class Interrupted(Exception):
    pass


def test_an_interrupted_run_aborts_the_tree() -> None:
    # An exception raised while run() waits (as Ctrl-C's KeyboardInterrupt
    # would be) sends dsh-exec SIGTERM; run() returns only once it is gone.
    marker = f"1000.{random.randrange(10**8, 10**9)}"

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        started = time.monotonic()
        with pytest.raises(Interrupted):
            dsh_exec.run(f"sleep {marker}")
        assert time.monotonic() - started < 5
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert processes_with_arg(marker) == set()


def test_warnings_on_stderr_are_kept(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    result = dsh_exec.run(
        "true", workdir=tmp_path, sandbox="workspace-write", writable_roots=[missing]
    )
    assert result.exit_code == 0
    assert result.warnings == (
        f"writable root {missing} skipped: No such file or directory (os error 2)",
    )
    assert dsh_exec.run("true").warnings == ()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"stdin": 123}, "stdin: expected bytes or str, got int"),
        ({"stdin": True}, "stdin: expected bytes or str, got bool"),
        ({"sandbox": 5}, "sandbox: expected a str, got int"),
        ({"workdir": 5}, "workdir: expected a path, got int"),
        ({"network": ["deny"]}, "network: expected a str, got list"),
        ({"env": ["A=1"]}, "env: expected a mapping of names to values, got list"),
        (
            {"stdout_max_bytes": 1.5},
            "stdout_max_bytes: expected bytes (int) or a size string, got float",
        ),
    ],
)
def test_a_wrong_type_is_a_type_error_naming_the_argument(kwargs, message) -> None:
    with pytest.raises(TypeError) as caught:
        dsh_exec.run("true", **kwargs)
    assert str(caught.value) == message


def test_no_command_is_a_type_error() -> None:
    with pytest.raises(TypeError) as caught:
        dsh_exec.run(None)  # type: ignore[arg-type]
    assert str(caught.value) == "command: expected a str or a sequence of str, got NoneType"
