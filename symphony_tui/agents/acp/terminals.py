"""The ACP client's terminals: commands the agent runs through this client, inside the
issue's workspace (https://agentclientprotocol.com/protocol/terminals).

* ``terminal/create {command, args?, env?, cwd?, outputByteLimit?}`` -> ``{terminalId}``:
  ``command`` with ``args`` as a program and its arguments, or, without ``args``, as a
  ``bash -c`` command line; in ``cwd`` (absolute, inside the workspace; default the
  workspace), in a process group of its own, with the session's environment (the
  scheduler's secrets already removed) plus ``env``; stdin closed, stderr joined to stdout.
* ``terminal/output`` -> ``{output, truncated, exitStatus?}``: what it wrote, at most
  ``outputByteLimit`` bytes (never more than :data:`OUTPUT_LIMIT_BYTES`), cut from the
  beginning at a character boundary when longer.
* ``terminal/wait_for_exit`` -> ``{exitCode, signal}``; ``terminal/kill`` ends its process
  group (SIGTERM, a grace, SIGKILL) and keeps it for ``output``; ``terminal/release``
  kills it and forgets it.

At most :data:`MAX_TERMINALS` live at once in a session; every terminal is killed when the
session closes. ``on_groups`` hears the live terminals' process groups
(``hosts/local_group.identify`` records) whenever they change, for the workspace manifest:
a restarted scheduler's reap of leftovers ends them when this one died without closing. Refusals are :class:`~symphony_tui.agents.acp.files.MethodRefused` (the
JSON-RPC error the agent reads).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
from collections.abc import Callable
from typing import Any

from symphony_tui.agents.acp.files import INVALID_PARAMS, NOT_FOUND, MethodRefused, WorkspaceFiles
from symphony_tui.agents.codex.process import kill_group, release
from symphony_tui.hosts.local_group import identify

OUTPUT_LIMIT_BYTES = 1024 * 1024
MAX_TERMINALS = 16
#: Released terminals whose output is still kept (for the tool call that shows it).
KEEP_RELEASED = 16
_READ = 65536


def _tail(data: bytearray, limit: int) -> tuple[bytes, bool]:
    """The last ``limit`` bytes of ``data``, starting on a UTF-8 character boundary, and
    whether anything was cut."""
    if len(data) <= limit:
        return bytes(data), False
    cut = bytes(data[len(data) - limit :])
    start = 0
    while start < len(cut) and start < 4 and (cut[start] & 0xC0) == 0x80:
        start += 1  # a continuation byte: the character began before the cut
    return cut[start:], True


class Terminal:
    """One command and what it wrote (its last ``limit`` bytes)."""

    def __init__(self, proc: asyncio.subprocess.Process, limit: int) -> None:
        self.proc = proc
        self.limit = limit
        self.output = bytearray()
        self.truncated = False
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := await self.proc.stdout.read(_READ):
            self.output += chunk
            if len(self.output) > 2 * self.limit:  # keep memory bounded while it runs
                kept, _ = _tail(self.output, self.limit)
                self.output = bytearray(kept)
                self.truncated = True

    def exit_status(self) -> dict[str, Any] | None:
        code = self.proc.returncode
        if code is None:
            return None
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return {"exitCode": None, "signal": name}
        return {"exitCode": code, "signal": None}

    def answer(self) -> dict[str, Any]:
        text, cut = _tail(self.output, self.limit)
        out: dict[str, Any] = {
            "output": text.decode("utf-8", "replace"),
            "truncated": cut or self.truncated,
        }
        status = self.exit_status()
        if status is not None:
            out["exitStatus"] = status
        return out

    async def kill(self) -> None:
        if self.proc.returncode is None:
            await kill_group(self.proc)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(self.reader, 2)


class Terminals:
    """``terminal/*`` for one session: commands run in ``files.root`` with ``env``."""

    def __init__(
        self,
        files: WorkspaceFiles,
        env: dict[str, str],
        on_groups: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        self._files = files
        self._env = env
        self._on_groups = on_groups
        self._groups: dict[str, dict[str, Any]] = {}
        self._live: dict[str, Terminal] = {}
        self._released: dict[str, str] = {}
        self._ids = itertools.count(1)

    def text(self, terminal_id: str) -> str | None:
        """The output of terminal ``terminal_id`` so far (live or among the last
        :data:`KEEP_RELEASED` released), or None."""
        terminal = self._live.get(terminal_id)
        if terminal is not None:
            return str(terminal.answer()["output"])
        return self._released.get(terminal_id)

    def _get(self, params: dict[str, Any]) -> Terminal:
        terminal = self._live.get(str(params.get("terminalId")))
        if terminal is None:
            raise MethodRefused(NOT_FOUND, f"no terminal {params.get('terminalId')!r}")
        return terminal

    async def create(self, params: dict[str, Any]) -> dict[str, Any]:
        if len(self._live) >= MAX_TERMINALS:
            raise MethodRefused(INVALID_PARAMS, f"at most {MAX_TERMINALS} terminals at once")
        command, args = params.get("command"), params.get("args") or []
        if not isinstance(command, str) or not command.strip():
            raise MethodRefused(INVALID_PARAMS, "command must be a non-empty string")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise MethodRefused(INVALID_PARAMS, "args must be a list of strings")
        cwd = params.get("cwd")
        where = self._files.root if cwd is None else self._files.inside(cwd)
        env = dict(self._env)
        for var in params.get("env") or []:
            if isinstance(var, dict) and isinstance(var.get("name"), str):
                env[var["name"]] = str(var.get("value") or "")
        limit = params.get("outputByteLimit")
        cap = OUTPUT_LIMIT_BYTES
        if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0:
            cap = min(limit, OUTPUT_LIMIT_BYTES)
        argv = [command, *args] if args else ["bash", "-c", command]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(where),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            raise MethodRefused(
                INVALID_PARAMS, f"cannot start {command!r}: {e.strerror or e}"
            ) from e
        tid = f"term-{next(self._ids)}"
        self._live[tid] = Terminal(proc, cap)
        group = identify(proc.pid)
        if group is not None:
            self._groups[tid] = group
            self._groups_changed()
        return {"terminalId": tid}

    def _groups_changed(self) -> None:
        if self._on_groups is not None:
            self._on_groups(list(self._groups.values()))

    async def output(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._get(params).answer()

    async def wait_for_exit(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._get(params)
        await terminal.proc.wait()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(terminal.reader), 2)
        status = terminal.exit_status()
        assert status is not None
        return status

    async def kill(self, params: dict[str, Any]) -> dict[str, Any]:
        await self._get(params).kill()
        return {}

    async def release(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._get(params)
        del self._live[str(params.get("terminalId"))]
        await terminal.kill()
        if self._groups.pop(str(params.get("terminalId")), None) is not None:
            self._groups_changed()
        release(terminal.proc)
        self._released[str(params.get("terminalId"))] = str(terminal.answer()["output"])
        while len(self._released) > KEEP_RELEASED:
            del self._released[next(iter(self._released))]
        return {}

    async def close(self) -> None:
        """Kill every terminal (the session ends)."""
        live, self._live = list(self._live.values()), {}
        await asyncio.gather(*(t.kill() for t in live), return_exceptions=True)
        if self._groups:
            self._groups.clear()
            self._groups_changed()
        for terminal in live:
            release(terminal.proc)

    def handler(self, method: str) -> Any:
        """The coroutine function serving ``method`` (``terminal/...``), or None."""
        return {
            "terminal/create": self.create,
            "terminal/output": self.output,
            "terminal/wait_for_exit": self.wait_for_exit,
            "terminal/kill": self.kill,
            "terminal/release": self.release,
        }.get(method)
