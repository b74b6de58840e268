"""Really run a (harmless) shell command in the workspace and stream its output.

The demo agent's ``commandExecution`` items are not pretend: the command runs with
``/bin/sh -c`` in the thread's cwd, stdout and stderr merged, and every chunk is handed to
``on_output`` as it arrives (it becomes ``item/commandExecution/outputDelta``). Cancelling the
awaiting task (an interrupt) kills the command's whole process group.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

COMMAND_TIMEOUT_S = 30.0
#: The aggregate (``aggregatedOutput``) keeps the first this many bytes of the output.
MAX_OUTPUT_BYTES = 64 * 1024


def cut_notice(dropped: int) -> str:
    """The line that ends an aggregate cut short: how many bytes it does not show."""
    return f"\n… ({dropped} more bytes not shown)\n"


async def run_command(
    command: str, cwd: Path, on_output: Callable[[str], None]
) -> tuple[int | None, str]:
    """Run ``command``; returns ``(exit_code, aggregated_output)``.

    ``exit_code`` is None when the command could not start or timed out (the reason is then
    in the output). The aggregate keeps the first ``MAX_OUTPUT_BYTES`` (cut at a character
    boundary) and then says how many bytes it leaves out (:func:`cut_notice`); every chunk
    still goes to ``on_output``, decoded as UTF-8 across chunk boundaries.
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
    aggregate = _Aggregate()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(COMMAND_TIMEOUT_S):
            while chunk := await proc.stdout.read(4096):
                aggregate.add(chunk)
                if text := decoder.decode(chunk):
                    on_output(text)
            if text := decoder.decode(b"", final=True):
                on_output(text)
            code = await proc.wait()
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        text = f"\n[timed out after {COMMAND_TIMEOUT_S:.0f}s]\n"
        on_output(text)
        return None, aggregate.text() + text
    except asyncio.CancelledError:
        _kill(proc)
        with contextlib.suppress(Exception):
            await asyncio.shield(proc.wait())
        raise
    return code, aggregate.text()


class _Aggregate:
    """The first ``limit`` bytes of a command's output and a count of the rest."""

    def __init__(self, limit: int = MAX_OUTPUT_BYTES) -> None:
        self._kept = bytearray()
        self._limit = limit
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self._limit - len(self._kept)
        self._kept += chunk[:room]
        self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        """The kept bytes as text; when some were left out, :func:`cut_notice` ends it (a
        character cut at the limit counts as left out, not as U+FFFD)."""
        kept = bytes(self._kept)
        if not self.dropped:
            return kept.decode("utf-8", errors="replace")
        whole = _whole_characters(kept)
        dropped = self.dropped + len(kept) - len(whole)
        return whole.decode("utf-8", errors="replace") + cut_notice(dropped)


def _whole_characters(data: bytes) -> bytes:
    """``data`` without an incomplete UTF-8 sequence at its end."""
    for back in range(1, min(4, len(data)) + 1):
        lead = data[-back]
        if lead & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for its lead
        need = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        return data if back >= need else data[:-back]
    return data


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
