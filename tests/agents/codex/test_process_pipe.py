"""The app-server's stdout pipe is kept small: queued text is latency for control messages."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from symphony_tui.agents.codex.process import (
    STDOUT_PIPE_BYTES,
    kill_group,
    launch,
    stdout_pipe_bytes,
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
async def test_stdout_pipe_is_shrunk_and_long_output_still_arrives_whole(tmp_path: Path):
    # 300 KB in one line: far more than the pipe and the reader's pause threshold hold
    proc = await launch(
        f"{sys.executable} -c \"import sys; sys.stdout.write('x' * 300_000 + chr(10))\"",
        tmp_path,
        {"PATH": "/usr/bin:/bin"},
    )
    try:
        assert stdout_pipe_bytes(proc) == STDOUT_PIPE_BYTES
        assert proc.stdout is not None
        data = b""
        while chunk := await proc.stdout.read(65536):
            data += chunk
        assert data == b"x" * 300_000 + b"\n"
    finally:
        await kill_group(proc)
