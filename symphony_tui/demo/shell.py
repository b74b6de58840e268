"""Really run a (harmless) shell command in the workspace and stream its output.

The demo agent's ``commandExecution`` items are not pretend: the command runs with
``/bin/sh -c`` in the thread's cwd, stdout and stderr merged, and every chunk is handed to
``on_output`` as it arrives (it becomes ``item/commandExecution/outputDelta``). Cancelling the
awaiting task (an interrupt) kills the command's whole process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

COMMAND_TIMEOUT_S = 30.0
MAX_OUTPUT_CHARS = 64 * 1024


async def run_command(
    command: str, cwd: Path, on_output: Callable[[str], None]
) -> tuple[int | None, str]:
    """Run ``command``; returns ``(exit_code, aggregated_output)``.

    ``exit_code`` is None when the command could not start or timed out (the reason is then
    in the output). Output beyond ``MAX_OUTPUT_CHARS`` is dropped from the aggregate.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        text = f"could not start: {exc}\n"
        on_output(text)
        return None, text
    chunks: list[str] = []
    size = 0
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(COMMAND_TIMEOUT_S):
            while chunk := await proc.stdout.read(4096):
                text = chunk.decode("utf-8", errors="replace")
                on_output(text)
                if size < MAX_OUTPUT_CHARS:
                    chunks.append(text[: MAX_OUTPUT_CHARS - size])
                    size += len(chunks[-1])
            code = await proc.wait()
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        text = f"\n[timed out after {COMMAND_TIMEOUT_S:.0f}s]\n"
        on_output(text)
        return None, "".join(chunks) + text
    except asyncio.CancelledError:
        _kill(proc)
        with contextlib.suppress(Exception):
            await asyncio.shield(proc.wait())
        raise
    return code, "".join(chunks)


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
