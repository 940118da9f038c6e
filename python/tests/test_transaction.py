"""transaction=True and the decisions after it: commit(), discard(), diff()
and their asyncio twins. Running a transaction needs root (or
CAP_SYS_ADMIN): those tests skip elsewhere, with the reason."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import dsh_exec


def has_sys_admin() -> bool:
    """Whether this process holds CAP_SYS_ADMIN (bit 21 of CapEff)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 21))
    return False


needs_root = pytest.mark.skipif(
    not has_sys_admin(), reason="needs root (a transaction's overlays and mount namespace)"
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace (its real path, as a transaction names it) holding ``keep``."""
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    (root / "keep").write_text("old\n")
    return root


@needs_root
def test_a_transaction_lists_its_changes_and_commit_applies_them(ws: Path) -> None:
    result = dsh_exec.run("printf 'new\\n' > f", workdir=ws, transaction=True)
    assert result.exit_code == 0
    assert result.sandbox is not None and result.sandbox.mode == "workspace-write"
    tx = result.transaction
    assert tx is not None
    assert tx == dsh_exec.Transaction(
        id=tx.id,
        state="pending",
        changes=(dsh_exec.Change(path=str(ws / "f"), change="created", kind="file", size=4),),
        changes_more=0,
        created=1,
        modified=0,
        deleted=0,
    )
    assert not (ws / "f").exists()
    expected = f"--- /dev/null\n+++ b{ws / 'f'}\n@@ -0,0 +1 @@\n+new\n"
    assert dsh_exec.diff(tx.id) == expected
    assert dsh_exec.diff(tx.id, ws / "f") == expected
    assert dsh_exec.diff(tx.id, str(ws / "keep")) == ""
    assert dsh_exec.commit(tx.id) == dsh_exec.CommitReport(applied=1, refused=(), state="committed")
    assert (ws / "f").read_text() == "new\n"
    with pytest.raises(dsh_exec.DshExecError) as caught:
        dsh_exec.commit(tx.id)
    assert caught.value.code == "TRANSACTION_FAILED"
    assert caught.value.exit_status == 125


@needs_root
def test_discard_leaves_the_real_tree_as_it_was(ws: Path) -> None:
    job = dsh_exec.start("rm keep; echo x > g", workdir=ws, transaction=True)
    result = job.wait(timeout=30)
    assert result is not None and result.transaction is not None
    tx = result.transaction
    assert (tx.state, tx.created, tx.modified, tx.deleted) == ("pending", 1, 0, 1)
    assert [(c.path, c.change) for c in tx.changes] == [
        (str(ws / "g"), "created"),
        (str(ws / "keep"), "deleted"),
    ]
    assert dsh_exec.discard(tx.id) is None
    assert (ws / "keep").read_text() == "old\n"
    assert not (ws / "g").exists()
    with pytest.raises(dsh_exec.DshExecError) as caught:
        dsh_exec.discard(tx.id)
    assert caught.value.code == "TRANSACTION_FAILED"


@needs_root
def test_on_exit_commit_decides_at_the_end(ws: Path) -> None:
    result = dsh_exec.run("echo more >> keep", workdir=ws, transaction=True, on_exit="commit")
    tx = result.transaction
    assert tx is not None
    assert (tx.state, tx.modified) == ("committed", 1)
    assert tx.changes == (
        dsh_exec.Change(
            path=str(ws / "keep"), change="modified", kind="file", size=9, what=("content", "times")
        ),
    )
    assert tx.commit == dsh_exec.CommitReport(applied=1, refused=(), state="committed")
    assert (ws / "keep").read_text() == "old\nmore\n"


@needs_root
def test_the_asyncio_twins(ws: Path) -> None:
    async def main() -> tuple[str, dsh_exec.CommitReport, str]:
        result = await dsh_exec.arun("echo a > a; echo b > b", workdir=ws, transaction=True)
        assert result.transaction is not None
        first = result.transaction.id
        shown = await dsh_exec.adiff(first, ws / "a")
        report = await dsh_exec.acommit(first, atomic=True)
        job = await dsh_exec.astart("echo c > c", workdir=ws, transaction=True)
        waited = await job.wait(timeout=30)
        assert waited is not None and waited.transaction is not None
        await dsh_exec.adiscard(waited.transaction.id)
        return shown, report, first

    shown, report, _ = asyncio.run(main())
    assert shown == f"--- /dev/null\n+++ b{ws / 'a'}\n@@ -0,0 +1 @@\n+a\n"
    assert report == dsh_exec.CommitReport(applied=2, refused=(), state="committed")
    assert sorted(p.name for p in ws.iterdir()) == ["a", "b", "keep"]


@pytest.mark.parametrize("decide", [dsh_exec.commit, dsh_exec.discard, dsh_exec.diff])
def test_an_unknown_transaction_raises(decide) -> None:
    with pytest.raises(dsh_exec.DshExecError) as caught:
        decide("tabcd1234")
    assert caught.value.code == "TRANSACTION_FAILED"
    assert caught.value.message == "transaction tabcd1234: no such transaction"
    assert caught.value.exit_status == 125


def test_on_exit_without_a_transaction_is_the_binarys_usage_error() -> None:
    with pytest.raises(dsh_exec.DshExecError) as caught:
        dsh_exec.run("true", on_exit="commit")
    assert caught.value.code == "USAGE"
    assert "--on-exit needs --transaction" in caught.value.message


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: dsh_exec.run("true", transaction="yes"), "transaction: expected a bool, got str"),
        (lambda: dsh_exec.start("true", transaction=1), "transaction: expected a bool, got int"),
        (lambda: dsh_exec.run("true", on_exit=1), "on_exit: expected a str, got int"),
        (lambda: dsh_exec.commit(5), "id: expected a transaction id (str), got int"),
        (lambda: dsh_exec.commit("t1", atomic="yes"), "atomic: expected a bool, got str"),
        (lambda: dsh_exec.discard(None), "id: expected a transaction id (str), got NoneType"),
        (lambda: dsh_exec.diff("t1", 5), "paths: expected paths, got int"),
    ],
)
def test_a_wrong_type_is_a_type_error_naming_the_argument(call, message) -> None:
    with pytest.raises(TypeError) as caught:
        call()
    assert str(caught.value) == message


def test_a_transaction_in_a_result_is_typed() -> None:
    stream = {"text": "", "truncated": False, "total_bytes": 0, "spill_path": None}
    data = {
        "command": "true", "workdir": "/w", "exit_code": 0, "signal": None,
        "timed_out": False, "aborted": False, "timeout_ms": None, "duration_ms": 1,
        "stdout": stream, "stderr": stream, "sandbox": None,
        "transaction": {
            "id": "tabcd1234", "state": "committed", "changes_more": 0,
            "created": 1, "modified": 1, "deleted": 0, "error": None,
            "changes": [
                {"path": "/w/a", "change": "created", "kind": "file", "size": 1},
                {"path": "/w/b", "change": "modified", "kind": "file", "size": 2,
                 "what": ["content", "mode"]},
            ],
            "commit": {"applied": 1, "refused": [{"path": "/w/b", "reason": "protected path"}],
                       "state": "pending"},
        },
    }  # fmt: skip
    tx = dsh_exec.RunResult.from_json(data).transaction
    assert tx is not None
    assert tx.changes == (
        dsh_exec.Change(path="/w/a", change="created", kind="file", size=1),
        dsh_exec.Change(path="/w/b", change="modified", kind="file", size=2,
                        what=("content", "mode")),
    )  # fmt: skip
    assert tx.commit == dsh_exec.CommitReport(
        applied=1,
        refused=(dsh_exec.Refusal(path="/w/b", reason="protected path"),),
        state="pending",
    )
