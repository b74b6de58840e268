"""One codex app-server process driving one thread for one issue (spec §10; docs/protocols.md).

Lifecycle: :meth:`CodexSession.open` launches ``bash -lc <codex.command>`` in the workspace
(stdio; with ``codex.transport: unix`` detached on a unix socket, :mod:`.detached`, or it
re-attaches to one an earlier scheduler left running), does the handshake (``initialize``
-> ``initialized`` -> ``thread/resume`` or ``thread/start``) and records the thread id
with the host. :meth:`run_turn` sends
``turn/start`` and turns notifications into events until ``turn/completed``.
:meth:`close` kills the whole process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from symphony_tui import __version__
from symphony_tui.agents.base import AgentError, SessionHost, TurnResult
from symphony_tui.agents.codex.coalesce import EventOutlet
from symphony_tui.agents.codex.detached import (
    DetachedAgent,
    kill_pgid,
    launch_detached,
    remove_socket,
    socket_folder,
)
from symphony_tui.agents.codex.eager import SessionTasks
from symphony_tui.agents.codex.exec_server import ExecServerLink, link_changed
from symphony_tui.agents.codex.link import AppServerLink, LocalPlace, Place, link_event, open_link
from symphony_tui.agents.codex.notifications import Notifications
from symphony_tui.agents.codex.process import (
    StderrTail,
    describe_exit,
    kill_group,
    launch,
    release,
)
from symphony_tui.agents.codex.remote_detached import HostPlace, launch_on_host, stop_on_host
from symphony_tui.agents.codex.rpc import RequestId, RpcConnection, RpcError
from symphony_tui.agents.codex.server_requests import ServerRequests
from symphony_tui.agents.codex.steering import Steering
from symphony_tui.agents.codex.turns import PendingRequests, TurnTracker
from symphony_tui.agents.remote_launch import RemoteLaunch
from symphony_tui.config.settings import CodexSettings
from symphony_tui.workspaces.manifest import manifest_dir

__all__ = ["CLIENT_NAME", "CLIENT_VERSION", "INITIALIZE_PARAMS", "CodexSession"]

CLIENT_NAME = "symphony-tui"
CLIENT_VERSION = __version__
#: The ``initialize`` request's params (docs/protocols.md "Codex app-server").
INITIALIZE_PARAMS = {
    "clientInfo": {"name": CLIENT_NAME, "title": "Symphony TUI", "version": CLIENT_VERSION},
    "capabilities": {"experimentalApi": True},
}


class CodexSession:
    """An :class:`~symphony_tui.agents.base.AgentSession` over the codex app-server.

    This class owns the process and the connection (launch, handshake, re-attach, close);
    the protocol is done by its parts, each holding its own state, wired once here:

    * ``_rpc`` (:mod:`.rpc`): JSON-RPC lines, one per open connection;
    * ``_out`` (:mod:`.coalesce`): every event to the host, stamped, deltas held while
      the host is congested;
    * ``_turns`` (:mod:`.turns`): the thread (start, resume, re-attach) and the turn in
      flight, its end and the fallbacks for a missing one;
    * ``_notes`` (:mod:`.notifications`): notifications -> events and turn transitions;
    * ``_requests`` (:mod:`.server_requests`): approvals, questions and tool calls, each
      served in its own task; ``_steering`` (:mod:`.steering`): ``turn/steer``.

    ``env``: the app-server's environment; ``sent``: optional list that records every
    JSON-RPC message written (tests validate them against the binary's schema);
    ``on_close(session)`` is called once when it closes; ``remote``: the app-server runs on
    a worker host (agents/remote_launch.py); ``adopt``: re-attach to this detached
    app-server (``codex.transport: unix``) an earlier scheduler left running; ``groups``:
    the backend's live detached process groups, this session's in it from its launch (or
    adoption) until its close ended it; ``exec_server``: the app-server runs here (stdio,
    in a private folder) and its commands and file edits run in the workspace on a worker
    host, through this exec-server link (agents/codex/exec_server.py).
    """

    def __init__(
        self,
        host: SessionHost,
        settings: CodexSettings,
        env: Mapping[str, str],
        *,
        sent: list[dict[str, Any]] | None = None,
        on_close: Callable[[Any], None] | None = None,
        remote: RemoteLaunch | None = None,
        adopt: DetachedAgent | None = None,
        groups: dict[int, DetachedAgent] | None = None,
        exec_server: ExecServerLink | None = None,
    ) -> None:
        self._host = host
        self._exec = exec_server
        self._scratch: Path | None = None  # the exec-server mode app-server's folder here
        self._cfg = settings
        self._env = dict(env)
        self._sent = sent
        self._on_close = on_close
        self._timeout_s = settings.read_timeout_ms / 1000
        #: ``codex.transport: unix``: the detached app-server (launched, or ``adopt``:
        #: one an earlier scheduler left running, re-attached by :meth:`open`).
        self._agent: DetachedAgent | None = adopt
        self._adopting = adopt is not None
        self._groups = groups if groups is not None else {}
        if adopt is not None and adopt.host is None:  # a worker host's is not ours to kill
            self._groups[adopt.pgid] = adopt
        self._link: AppServerLink | None = None
        self._remote = remote
        #: The host whose connection failed under this session (None: it did not).
        self.host_lost: str | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._rpc: RpcConnection | None = None
        self._stderr = StderrTail()
        self._stderr_task: asyncio.Task[None] | None = None
        self._closed = False
        # The parts. None of them holds the session: a closed session is freed by
        # reference counting, without a collection.
        self._out = EventOutlet(host)
        self._tasks = SessionTasks()
        pending = PendingRequests()
        detached = adopt is not None or settings.detached
        self._turns = TurnTracker(host, settings, self._out, pending, record_turns=detached)
        self._steering = Steering(self._turns, self._out, self._timeout_s)
        file_paths: dict[str, tuple[str, ...]] = {}
        self._notes = Notifications(self._turns, self._out, pending, self._tasks, file_paths)
        self._requests = ServerRequests(
            host, self._out, self._steering, pending, self._tasks, file_paths
        )

    # ------------------------------------------------------------------ facts
    @property
    def session_id(self) -> str | None:
        """``<thread>-<turn>`` once a turn id is known."""
        return self._out.session_id

    @property
    def thread_id(self) -> str | None:
        return self._turns.thread_id

    @property
    def pid(self) -> int | None:
        if self._proc is not None:
            return self._proc.pid
        return self._agent.pid if self._agent is not None else None

    @property
    def detached(self) -> DetachedAgent | None:
        """The detached app-server this session talks to (``codex.transport: unix``)."""
        return self._agent

    @property
    def link_mode(self) -> str:
        """How the scheduler reaches the agent: ``local``, ``ssh`` or ``exec-server``."""
        if self._exec is not None:
            return "exec-server"
        return "local" if self._remote is None else "ssh"

    @property
    def stderr_tail(self) -> list[str]:
        return list(self._stderr.lines)

    # ------------------------------------------------------------------ start
    async def open(self) -> None:
        """Launch and handshake. Raises ``AgentError`` (launch_failed, read_timeout,
        handshake_failed, process_exited); the process is killed on failure."""
        try:
            await self._open()
        except BaseException as e:
            await self.close()
            if isinstance(e, AgentError) and self.host_lost:
                e.host_lost = self.host_lost
            raise

    async def _open(self) -> None:
        if self._agent is not None and self._adopting:
            await self._reattach(self._agent)
            return
        cmd = self._cfg.command
        if self._exec is not None:
            await self._open_exec_server(cmd, self._exec)
            return
        if self._cfg.detached:
            await self._launch_detached(cmd)
            await self._handshake(cmd)
            await self._open_thread()
            return
        if self._remote is not None:
            try:
                proc = await self._remote.launch(cmd, self._host.workspace)
            except AgentError as e:
                self.host_lost = e.host_lost
                raise
        else:
            proc = await launch(cmd, self._host.workspace, self._env)
        self._proc = proc
        assert proc.stdout and proc.stdin and proc.stderr
        self._stderr_task = asyncio.create_task(self._stderr.drain(proc.stderr))
        self._start_rpc(proc.stdout, proc.stdin)
        await self._handshake(cmd)
        await self._open_thread()

    async def _open_exec_server(self, cmd: str, link: ExecServerLink) -> None:
        """The exec-server on the host and its forward, then the app-server here (stdio,
        in a private folder: the workspace is on the host), given that environment with
        ``environment/add`` before the thread opens there."""
        link.on_state = self._out.emit
        link.on_lost = self._exec_lost
        starting = asyncio.ensure_future(link.start())  # the host and here side by side
        try:
            self._scratch = socket_folder()
            self._proc = await launch(cmd, self._scratch, self._env)
            proc = self._proc
            assert proc.stdout and proc.stdin and proc.stderr
            self._stderr_task = asyncio.create_task(self._stderr.drain(proc.stderr))
            self._start_rpc(proc.stdout, proc.stdin)
            await self._handshake(cmd)
        except BaseException:
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting
            raise
        try:
            await starting
        except AgentError as e:
            self.host_lost = e.host_lost
            raise
        self._out.emit(link_changed(link.host, "connected", None, ""))
        assert self._rpc is not None
        try:  # the params hold the token: the error says only what codex answered
            await self._rpc.request("environment/add", link.environment(), self._timeout_s)
        except RpcError as e:
            raise AgentError("handshake_failed", f"environment/add refused: {e.message}") from None
        self._turns.environments = link.environments()
        await self._open_thread()

    def _exec_lost(self) -> None:
        """The exec-server link is lost: end the app-server here, so the turn in flight
        fails with the link's reason (``_describe_exit``)."""
        link = self._exec
        if link is not None and link.host_lost:
            self.host_lost = link.host_lost
        if self._proc is not None and self._proc.returncode is None:
            self._tasks.spawn(kill_group(self._proc))

    def _start_rpc(self, reader: asyncio.StreamReader, writer: Any) -> None:
        self._rpc = RpcConnection(
            reader,
            writer,
            on_notification=self._notes.handle,
            on_request=self._on_request,
            on_malformed=self._notes.malformed,
            on_eof=self._describe_exit,
            sent=self._sent,
            pace=self._out.pace,  # held deltas, then the scheduler's back-pressure
            hurry=self._out.hurry,  # a request arrived meanwhile
        )
        self._out.clock = self._rpc
        self._rpc.start()

    def _on_request(self, rid: RequestId, method: str, params: dict[str, Any]) -> None:
        assert self._rpc is not None
        self._requests.take(self._rpc, rid, method, params)

    async def _handshake(self, cmd: str) -> None:
        """``initialize`` then ``initialized``."""
        assert self._rpc is not None
        try:
            await self._rpc.request(
                "initialize",
                INITIALIZE_PARAMS,
                self._timeout_s,
            )
        except AgentError as e:
            if e.code == "process_exited":
                # A command that is not found exits before (or while) we write the first
                # request: the write fails with a pipe error that says nothing. The exit code
                # and stderr tail are what the operator needs.
                why = e.message if self._rpc.is_closed else await self._describe_exit()
                raise AgentError("launch_failed", f"{cmd!r}: {why}") from None
            raise
        except RpcError as e:
            raise AgentError("handshake_failed", f"initialize rejected: {e.message}") from None
        await self._rpc.notify("initialized")

    async def _open_thread(self) -> None:
        assert self._rpc is not None
        await self._turns.open(self._rpc, self.pid)
        self._notes.thread_opened()
        facts = {"thread_id": self._turns.thread_id, "backend": "codex"}
        if self._agent is not None:
            # A detached app-server: its thread on disk before the first turn, so no
            # approval (only a turn asks one) is shown while a crash would leave an agent
            # the next scheduler could not re-adopt by its thread.
            await self._host.record_session_durably(**facts)
        else:
            self._host.record_session(**facts)
        if self._link is not None:
            self._link.follow(self._turns.thread_id)

    # ------------------------------------------------------------------ detached
    async def _launch_detached(self, cmd: str) -> None:
        """Start the app-server detached on a unix socket, here (:mod:`.detached`) or on
        the worker host (:mod:`.remote_detached`), record it in the manifest at once (a
        crash from here on leaves it for re-adoption), and connect through its link
        (:mod:`.link`) before ``codex.reattach_timeout_ms`` (the process exiting first
        fails the launch)."""
        workspace = self._host.workspace
        if self._remote is not None:
            try:
                agent = await launch_on_host(
                    self._remote.target, cmd, str(workspace), self._remote.env
                )
            except AgentError as e:
                self.host_lost = e.host_lost
                raise
            self._agent = agent
        else:
            proc, agent = await launch_detached(cmd, workspace, self._env, manifest_dir(workspace))
            self._proc, self._agent = proc, agent
            self._groups[agent.pgid] = agent
        # no turn of this session yet: an earlier attempt's turn id must not be adopted
        self._host.record_session(backend="codex", agent=agent.facts(), turn_id=None)
        place = self._place_of(agent)
        try:
            self._link = await open_link(
                place,
                self._cfg.reattach_timeout_ms / 1000,
                exited=self._proc,
                **self._link_options(place),
            )
        except AgentError as e:
            self.host_lost = e.host_lost
            if place.host is not None and _program_missing(cmd, e.message):
                raise AgentError(
                    "launch_failed", f"{cmd!r} not found on host {place.host}: {e.message}"
                ) from None
            raise AgentError("launch_failed", f"{cmd!r}: {e.message}") from None
        self._start_rpc(self._link.reader, self._link.writer)

    def _place_of(self, agent: DetachedAgent) -> Place:
        if agent.host is None:
            return LocalPlace(agent)
        if self._remote is None:
            raise AgentError("reattach_failed", f"no connection to host {agent.host}")
        return HostPlace(self._remote.target, agent, str(self._host.workspace))

    def _link_options(self, place: Place) -> dict[str, Any]:
        lost_after_s = self._cfg.reattach_timeout_ms / 1000
        if place.host is not None and self._remote is not None:
            lost_after_s = self._remote.lost_after_s
        return {
            "hello": INITIALIZE_PARAMS,
            "lost_after_s": lost_after_s,
            "on_state": self._on_link_state,
        }

    def _on_link_state(self, state: str, since: Any, reason: str) -> None:
        """The link to a detached app-server changed state (:mod:`.link`)."""
        host = self._link.place.host if self._link is not None else None
        self._out.emit(link_event(host, state, since, reason))

    async def _reattach(self, agent: DetachedAgent) -> None:
        """Re-adopt an app-server an earlier scheduler left running: connect, handshake,
        ``thread/resume`` and catch up on the turn in flight (``TurnTracker.adopt``, then
        ``Notifications.replay``), all within ``codex.reattach_timeout_ms``. Raises ``AgentError``
        (``process_exited`` when it is gone, ``reattach_failed`` otherwise); the caller
        (:meth:`open`) then ends its process group."""
        place = self._place_of(agent)
        if await place.alive() is False:
            where = f" on host {agent.host}" if agent.host else ""
            raise AgentError(
                "process_exited", f"the detached app-server (pid {agent.pid}{where}) is gone"
            )
        limit = self._cfg.reattach_timeout_ms / 1000
        try:
            await asyncio.wait_for(self._reattach_steps(place, limit), limit)
        except TimeoutError:
            raise AgentError(
                "reattach_failed",
                f"app-server pid {agent.pid} not re-attached within "
                f"{self._cfg.reattach_timeout_ms} ms",
            ) from None
        except RpcError as e:
            raise AgentError("reattach_failed", f"{e.method} refused: {e.message}") from None
        except AgentError as e:
            if e.code in ("reattach_failed", "process_exited"):
                raise
            raise AgentError("reattach_failed", e.message) from None

    async def _reattach_steps(self, place: Place, limit: float) -> None:
        self._link = await AppServerLink.open(place, limit, **self._link_options(place))
        self._start_rpc(self._link.reader, self._link.writer)
        await self._handshake(self._cfg.command)
        assert self._rpc is not None
        found = await self._turns.adopt(self._rpc, self.pid)
        self._notes.replay(found)
        turn = self._turns.turn
        self._link.follow(self._turns.thread_id, turn.turn_id if turn is not None else None)
        self._adopting = False

    async def _describe_exit(self) -> str:
        """Called at stdout EOF: the exit code and the stderr tail, as one line."""
        self._out.flush()  # everything the agent wrote is handed over
        if self._exec is not None and self._exec.close_reason:
            if self._exec.host_lost:
                self.host_lost = self._exec.host_lost
            return self._exec.close_reason
        if self._agent is not None:
            return await self._describe_socket_end(self._agent)
        msg, lost = await describe_exit(
            "codex app-server exited",
            self._proc,
            self._stderr_task,
            self._stderr,
            self._remote,
            self._cfg.command,
        )
        if lost is not None:
            self.host_lost = lost
        return msg

    async def _describe_socket_end(self, agent: DetachedAgent) -> str:
        """The link to a detached app-server ended: why, and its log's tail."""
        link = self._link
        reason = link.close_reason if link is not None else "socket closed"
        if link is not None and link.host_lost:
            self.host_lost = link.host_lost
            return reason
        if self._proc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 2.0)
            gone = self._proc.returncode is not None
            code = f" with code {self._proc.returncode}" if gone else ""
        else:
            gone, code = link is not None and link.state == "lost", ""
        msg = f"codex app-server exited{code} ({reason})" if gone else f"codex app-server: {reason}"
        tail = await link.place.tail() if link is not None else ""
        return f"{msg}: {tail}" if tail else msg

    @property
    def adoptable(self) -> bool:
        """True while a detached app-server (``codex.transport: unix``) serves this open
        session: the start-up reaper leaves its process group to re-adoption."""
        return self._agent is not None and not self._closed

    # ------------------------------------------------------------------ close
    async def close(self) -> None:
        """Kill the process group, stop reading, release pending work. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._out.flush()
        if self._on_close is not None:
            self._on_close(self)
        turn = self._turns.turn
        if turn is not None:
            self._turns.abandon(turn, "session closed")
        self._tasks.cancel()
        agent = self._agent
        if self._exec is not None:
            await self._exec.stop()
        if self._remote is not None and agent is None:
            await self._remote.stop()  # the tree on the host first, then the local client
        if self._link is not None:
            await self._link.aclose()
        if agent is not None and agent.host is not None and self._remote is not None:
            await stop_on_host(self._remote.target, agent, str(self._host.workspace))
        elif self._proc is not None:
            await kill_group(self._proc)
        elif agent is not None:
            await kill_pgid(agent.pgid)  # adopted: not this process's child
        if agent is not None:
            if agent.host is None:
                self._groups.pop(agent.pgid, None)
                remove_socket(agent)
            with contextlib.suppress(Exception):
                self._host.record_session(agent=agent.facts(adoptable=False))
        if self._rpc is not None:
            await self._rpc.aclose()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task
        if self._proc is not None:
            release(self._proc)  # freed by reference counting with the session
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    # ------------------------------------------------------------------ turns
    def _live_rpc(self) -> RpcConnection:
        if self._rpc is None or self._closed:
            raise AgentError("process_exited", "session is closed")
        if self._rpc.is_closed:
            raise AgentError("process_exited", self._rpc.close_reason())
        return self._rpc

    async def run_turn(self, prompt: str, *, continuation: bool = False) -> TurnResult:
        """Run one turn (``turn/start``); returns how it ended. Raises ``AgentError`` when
        the process dies (``process_exited``) or a request gets no answer
        (``read_timeout``)."""
        return await self._turns.run(self._live_rpc(), prompt, continuation=continuation)

    async def follow_turn(self) -> TurnResult:
        """Wait for the end of the turn found in flight when the session re-attached to a
        detached app-server (``TurnTracker.adopt``), as :meth:`run_turn` waits for one it
        started. Raises ``AgentError`` like it."""
        turn = self._turns.turn
        if turn is None:
            raise AgentError("protocol_error", "no turn in flight to follow")
        if turn.done.done():
            return turn.done.result()
        self._live_rpc()
        return await self._turns.wait(turn)

    async def interrupt(self) -> None:
        """``turn/interrupt`` for the turn in flight; bounded by ``read_timeout_ms`` plus a
        short grace. Idempotent: concurrent calls share one attempt; no-op when idle."""
        await self._turns.interrupt()

    async def steer(self, text: str) -> bool:
        """The operator's own message into the turn in flight (``turn/steer``). False when
        no turn runs, or it ended before codex took the message; raises
        :class:`AgentError` when codex refused it for another reason."""
        return await self._steering.steer(text)


def _program_missing(command: str, reason: str) -> bool:
    """Whether a detached app-server's launch ``reason`` (its log's tail) says the shell
    found no ``command``'s program: ``bash: <program>: No such file or directory`` or
    ``... command not found`` (a detached launch has no exit code to read)."""
    words = command.split()
    if not words:
        return False
    program = words[0]
    return f"{program}: No such file or directory" in reason or (
        f"{program}: command not found" in reason
    )
