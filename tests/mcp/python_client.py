"""Drives `dsh-exec mcp` with the official MCP Python SDK's stdio client.

Usage: python_client.py DSH_EXEC WORKSPACE
Prints one line per check; exits non-zero on the first failure.
"""

import asyncio
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def processes_with_arg(arg: str) -> list:
    """Pids of the live processes one of whose arguments is exactly ``arg``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if arg.encode() in f.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                pass
    return found


async def main(binary: str, workspace: str) -> None:
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--sandbox", "workspace-write", "-C", workspace],
        env={
            k: os.environ[k]
            for k in ("PATH", "HOME", "XDG_RUNTIME_DIR", "TMPDIR")
            if k in os.environ
        },
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            names = sorted(t.name for t in tools.tools)
            assert names == [
                "commit", "diff", "discard", "kill", "list", "read", "run", "start", "wait",
                "write_stdin",
            ], names
            print("tools:", ",".join(names))

            result = await session.call_tool("run", {"command": "echo hi; exit 3"})
            text = result.content[0].text
            assert text == "hi\n[exit code: 3]\n", text
            assert result.structured_content["exit_code"] == 3, result.structured_content
            print("run: [exit code: 3]")

            started = await session.call_tool(
                "start", {"command": "python3 -i -q", "pty": True}
            )
            job = started.structured_content["job_id"]
            await session.call_tool("write_stdin", {"job_id": job, "data": "print(6*7)\n"})
            seen = ""
            for _ in range(100):
                reply = await session.call_tool("read", {"job_id": job})
                seen += reply.structured_content["delta_stdout"]
                if "42" in seen.split("print(6*7)")[-1]:
                    break
                await asyncio.sleep(0.1)
            assert "\n42\r\n" in seen, repr(seen)
            print("pty: 42")
            await session.call_tool("kill", {"job_id": job})

            # Parallel runs: four at once take the time of one.
            began = time.monotonic()
            results = await asyncio.gather(
                *(session.call_tool("run", {"command": f"sleep 1; echo {i}"}) for i in range(4))
            )
            took = time.monotonic() - began
            assert [r.content[0].text for r in results] == [
                f"{i}\n[exit code: 0]\n" for i in range(4)
            ], results
            assert took < 3, took
            print("parallel: 4 runs")

            # Cancelling one run (the SDK sends notifications/cancelled for
            # an abandoned call) ends its tree and leaves the other running.
            marker = f"7.{os.getpid()}"
            doomed = asyncio.ensure_future(session.call_tool("run", {"command": f"sleep {marker}"}))
            kept = asyncio.ensure_future(
                session.call_tool("run", {"command": "sleep 1.5; echo kept"})
            )
            for _ in range(100):
                if processes_with_arg(marker):
                    break
                await asyncio.sleep(0.05)
            assert processes_with_arg(marker), "the run did not start"
            doomed.cancel()
            for _ in range(100):
                if not processes_with_arg(marker):
                    break
                await asyncio.sleep(0.05)
            assert not processes_with_arg(marker), "the cancelled run survived"
            other = await kept
            assert other.content[0].text == "kept\n[exit code: 0]\n", other
            print("cancel one: the other ran on")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
