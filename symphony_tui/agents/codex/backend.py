"""The codex backend: a factory of :class:`CodexSession` (one app-server per session).

Environment of the child: the shared recipe (:mod:`symphony_tui.config.child_env`):
``os.environ`` overlaid by the constructor's ``env``, without the scheduler's secrets
(``unset`` and the workflow's ``tracker.secret_env_names``), overlaid by ``codex.env``
(``$VAR`` values resolved, an unset variable removes the name). Settings are read afresh for every new session, so a
reloaded workflow applies to the next dispatch (spec §6.2). A session whose host names a
worker host (``worker_host``) runs on it over ssh (agents/remote_launch.py), or, with that
host's ``codex_mode: exec-server``, runs here with its commands and file edits there
(agents/codex/exec_server.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from symphony_tui.agents.base import SessionHost
from symphony_tui.agents.codex.detached import DetachedAgent, remove_socket, socket_folder
from symphony_tui.agents.codex.exec_server import ExecServerLink
from symphony_tui.agents.codex.process import escaped_groups
from symphony_tui.agents.codex.session import CodexSession
from symphony_tui.agents.remote_launch import RemoteLaunch
from symphony_tui.config.child_env import ChildEnv
from symphony_tui.config.settings import CodexSettings, Settings
from symphony_tui.hosts.ssh import HostTargets

#: How long :meth:`CodexBackend.aclose` waits for its sessions' orderly close.
ACLOSE_S = 5.0


class CodexBackend:
    """:class:`~symphony_tui.agents.base.AgentBackend` for ``codex app-server`` (stdio, or
    detached on a unix socket with ``codex.transport: unix``: :meth:`adopt_session`
    re-attaches to one after a scheduler restart).

    ``sent``: when given, every JSON-RPC message any session writes is appended to it
    (tests validate them against the binary's schema).
    """

    name = "codex"

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        env: Mapping[str, str] | None = None,
        sent: list[dict[str, Any]] | None = None,
        unset: Iterable[str] = (),
    ) -> None:
        self._settings = settings
        self._env = dict(env or {})
        self._unset = frozenset(unset)
        self._sent = sent
        self._sessions: set[CodexSession] = set()
        #: Detached app-servers (by process group) whose sessions have not ended them yet.
        self._groups: dict[int, DetachedAgent] = {}
        self._targets = HostTargets(settings)

    def child_env(self, settings: Settings) -> dict[str, str]:
        """The environment a new app-server is launched with; ``unset`` names (the
        scheduler's own secrets, e.g. the tracker key) never reach the agent."""
        recipe = ChildEnv(self._env, self._unset | set(settings.tracker.secret_env_names))
        return recipe.build(settings.codex.env)

    def remote_env(self, settings: Settings, worker_host: str) -> dict[str, str | None]:
        """What is exported on a worker host: ``codex.env`` then the host's ``env``,
        resolved here against the scrubbed environment (None unsets the name there); the
        scheduler's environment itself stays here, its secrets included."""
        recipe = ChildEnv(self._env, self._unset | set(settings.tracker.secret_env_names))
        env = recipe.overrides(settings.codex.env)
        env.update(recipe.overrides(settings.worker.env_for(worker_host)))
        return env

    def remote_launch(self, settings: Settings, worker_host: str) -> RemoteLaunch:
        return RemoteLaunch(
            self._targets(worker_host),
            self.remote_env(settings, worker_host),
            lost_after_s=settings.worker.host_lost_after_ms / 1000,
        )

    def exec_server(self, settings: Settings, worker_host: str, cwd: str) -> ExecServerLink:
        """The exec-server link of a run in ``cwd`` on ``worker_host``: its program is the
        host's codex command's (``worker.hosts.<h>.commands.codex``, else
        ``codex.command``), its environment the host's ``env`` only (``codex.env``, the
        model's credentials among it, stays with the app-server here)."""
        recipe = ChildEnv(self._env, self._unset | set(settings.tracker.secret_env_names))
        return ExecServerLink(
            self._targets(worker_host),
            cwd,
            settings.worker.command_for(worker_host, "codex", settings.codex.command),
            recipe.overrides(settings.worker.env_for(worker_host)),
            socket_folder(),
            lost_after_s=settings.worker.host_lost_after_ms / 1000,
        )

    def session_settings(self, settings: Settings) -> CodexSettings:
        """``codex.*`` with the backend-neutral deadlines (``agent.turn_timeout_ms`` /
        ``agent.stall_timeout_ms`` win over ``codex.*``, see :class:`Settings`)."""
        return settings.codex.model_copy(
            update={
                "turn_timeout_ms": settings.turn_timeout_ms,
                "stall_timeout_ms": settings.stall_timeout_ms,
            }
        )

    async def start_session(self, host: SessionHost) -> CodexSession:
        """Launch codex in ``host.workspace`` and start or resume its thread.

        Raises ``AgentError`` (``launch_failed``, ``read_timeout``, ``handshake_failed``).
        """
        settings = self._settings()
        worker_host = host.worker_host
        cfg = self.session_settings(settings)
        if worker_host is not None and settings.worker.codex_mode_for(worker_host) == "exec-server":
            session = CodexSession(
                host,
                cfg.model_copy(update={"transport": "stdio"}),
                self.child_env(settings),
                sent=self._sent,
                on_close=self._sessions.discard,
                exec_server=self.exec_server(settings, worker_host, str(host.workspace)),
                groups=self._groups,
            )
            self._sessions.add(session)
            await session.open()
            return session
        if worker_host is not None:  # worker.hosts.<h>.commands.codex wins on that host
            command = settings.worker.command_for(worker_host, "codex", cfg.command)
            cfg = cfg.model_copy(update={"command": command})
        session = CodexSession(
            host,
            cfg,
            self.child_env(settings) if worker_host is None else {},
            sent=self._sent,
            on_close=self._sessions.discard,  # the set object never changes
            remote=None if worker_host is None else self.remote_launch(settings, worker_host),
            groups=self._groups,
        )
        self._sessions.add(session)
        await session.open()  # closes itself (and leaves the set) on failure
        return session

    async def adopt_session(self, host: SessionHost, agent: DetachedAgent) -> CodexSession:
        """Re-attach to ``agent``, a detached app-server an earlier scheduler left running
        in ``host.workspace`` (``codex.transport: unix``), its thread and turn in flight
        as ``host.resume`` records them; the session's :meth:`CodexSession.follow_turn`
        then waits for that turn. Raises ``AgentError`` (``process_exited``: it is gone;
        ``reattach_failed``: not re-attached within ``codex.reattach_timeout_ms``, its
        process group is ended)."""
        settings = self._settings()
        session = CodexSession(
            host,
            self.session_settings(settings),
            {},
            sent=self._sent,
            on_close=self._sessions.discard,
            remote=None if agent.host is None else self.remote_launch(settings, agent.host),
            adopt=agent,
            groups=self._groups,
        )
        self._sessions.add(session)
        await session.open()  # closes itself (and ends the group) on failure
        return session

    async def aclose(self) -> None:
        """Close every session this backend started and did not see closed (together,
        within :data:`ACLOSE_S`), then SIGKILL what is left of their detached app-servers:
        a detached agent does not end with this process, so none may be left behind."""
        sessions = [asyncio.ensure_future(s.close()) for s in list(self._sessions)]
        if sessions:
            await asyncio.wait(sessions, timeout=ACLOSE_S)
        self.kill_detached()

    def kill_detached(self) -> int:
        """SIGKILL every detached app-server group no session has ended yet, and the
        groups its children escaped to (no event loop needed). Returns how many."""
        agents, killed = list(self._groups.values()), 0
        for agent in agents:
            for group in (agent.pgid, *escaped_groups(agent.pgid)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signal.SIGKILL)
                    killed += group == agent.pgid
            remove_socket(agent)
            self._groups.pop(agent.pgid, None)
        return killed
