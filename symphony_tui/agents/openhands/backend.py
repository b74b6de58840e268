"""``agent.backend: openhands``: sessions on an OpenHands agent-server (PROTOCOLS.md).

Two ways to reach a server, from the ``openhands:`` block of WORKFLOW.md:

* ``base_url`` - a running server. ``session_api_key_env`` names the environment variable
  holding its session API key (sent as ``X-Session-API-Key``); ``ws_auth`` says how the
  event socket authenticates (``first_frame`` | ``query`` | ``header`` | ``none``).
* ``command`` - a managed local server (e.g. ``<venv>/bin/python -m openhands.agent_server``)
  started on first use on a free loopback port, probed with ``GET /health`` and stopped by
  :meth:`OpenHandsBackend.aclose`. Its state (conversations, secret key, log) lives under
  ``state_dir`` so conversations survive a console restart: the next console starts a new
  server on the same state and re-attaches to the recorded conversation.

  The managed server runs with ``HOME=<state_dir>/home`` (an empty folder) by default. The
  agent's terminal is an interactive bash that reads ``~/.bashrc``; a slow rc file (pyenv,
  nvm, conda init on a busy machine) races the tool's prompt setup and the first command
  then hangs for the tool's 30 s no-output timeout (measured on 1.58.2). ``openhands.env``
  is laid over that environment (``$VAR`` values resolved), so ``env: {HOME: $HOME}``
  restores the user's home (git identity, credentials) when its rc files are fast.

The session's client-side tools (``SessionHost.tools``, e.g. ``symphony_set_issue_state``)
are registered as the conversation's ``client_tools`` (1.58.2 ``ClientToolSpec``, their
descriptions noting that the immediate reply is not the result); see
:mod:`~symphony_tui.agents.openhands.session` for how calls are executed and
:mod:`~symphony_tui.agents.openhands.client_tools` for why results come a message later.

``openhands.llm`` is passed as ``agent_settings.llm`` (``$VAR`` values resolved; ``model``
required; ``usage_id`` defaults to ``agent``). One conversation per issue: its id, server URL
and WebSocket auth mode are recorded through :meth:`SessionHost.record_session`
(``conversation_id``, ``server_url``, ``ws_auth``, ``backend="openhands"``) and reused on the
next attempt or after a restart (``host.resume``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from symphony_tui.agents.base import AgentError, SessionHost
from symphony_tui.agents.openhands.client import OpenHandsClient, OpenHandsHTTPError
from symphony_tui.agents.openhands.client_tools import client_tool_specs
from symphony_tui.agents.openhands.server import ManagedServer
from symphony_tui.agents.openhands.session import OpenHandsSession
from symphony_tui.agents.openhands.stream import StreamOptions, WsAuth
from symphony_tui.config.settings import OpenHandsSettings, Settings, resolve_env
from symphony_tui.domain import AgentEvent, EventKind


def default_state_dir() -> Path:
    """Where a managed server keeps its conversations: the user state dir (platformdirs)."""
    return Path(platformdirs.user_state_dir("symphony-tui")) / "openhands"


@dataclass
class _Endpoint:
    base_url: str
    api_key: str | None
    ws_auth: WsAuth
    client: OpenHandsClient
    pid: int | None


class OpenHandsBackend:
    """Factory of :class:`OpenHandsSession`. ``env`` resolves ``$VAR`` settings and is the
    managed server's base environment (default: ``os.environ``)."""

    name = "openhands"

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        env: Mapping[str, str] | None = None,
        state_dir: Path | None = None,
        stream_options: StreamOptions | None = None,
    ) -> None:
        self._settings = settings
        self._env = dict(os.environ if env is None else env)
        self.state_dir = state_dir or default_state_dir()
        self._stream_options = stream_options
        self._lock = asyncio.Lock()
        self._server: ManagedServer | None = None
        self._endpoint: _Endpoint | None = None
        self._conversations: dict[str, str] = {}  # issue id -> conversation id
        self._sessions: set[OpenHandsSession] = set()

    @property
    def server(self) -> ManagedServer | None:
        """The managed server, when one is running."""
        return self._server

    async def start_session(self, host: SessionHost) -> OpenHandsSession:
        cfg = self._settings().openhands
        endpoint = await self._connect(cfg)
        resume = dict(host.resume or {})
        previous = None
        if resume.get("backend", "openhands") == "openhands":
            previous = resume.get("conversation_id")
        previous = previous or self._conversations.get(host.issue.id)
        body = self._create_body(cfg, host, previous)
        try:
            info = await endpoint.client.create_conversation(body)
        except OpenHandsHTTPError as e:
            if previous and e.status in (400, 409, 422):
                # The recorded conversation cannot be reopened here: start a fresh one.
                body.pop("conversation_id", None)
                info = await endpoint.client.create_conversation(body)
            else:
                raise
        cid = info["id"]
        self._conversations[host.issue.id] = cid
        host.record_session(
            conversation_id=cid,
            thread_id=cid,
            server_url=endpoint.base_url,
            ws_auth=endpoint.ws_auth,
            backend="openhands",
        )
        session = OpenHandsSession(
            host,
            endpoint.client,
            cid,
            ws_auth=endpoint.ws_auth,
            stream_options=self._stream_options or _options(cfg),
            pid=endpoint.pid,
            request_timeout_s=cfg.read_timeout_ms / 1000,
        )
        try:
            await session.attach()
        except BaseException:
            await session.close()
            raise
        self._sessions = {s for s in self._sessions if not s.closed}
        self._sessions.add(session)
        resumed = previous == cid
        host.emit(
            AgentEvent(
                kind=EventKind.SESSION_STARTED,
                message=(
                    f"{'re-attached to' if resumed else 'started'} conversation {cid} "
                    f"({session.status})"
                ),
                session_id=cid,
                data={
                    "thread_id": cid,
                    "session_id": cid,
                    "conversation_id": cid,
                    "server_url": endpoint.base_url,
                    "resumed": resumed,
                    "execution_status": session.status,
                    "pending_confirmations": len(session.pending_actions),
                },
            )
        )
        session.report_attached_usage()
        return session

    async def aclose(self) -> None:
        for session in list(self._sessions):
            await session.close()
        self._sessions.clear()
        async with self._lock:
            if self._endpoint is not None:
                await self._endpoint.client.aclose()
                self._endpoint = None
            if self._server is not None:
                await self._server.stop()
                self._server = None

    # ------------------------------------------------------------ internals

    async def _connect(self, cfg: OpenHandsSettings) -> _Endpoint:
        async with self._lock:
            timeout_s = cfg.read_timeout_ms / 1000
            if cfg.base_url:
                key = None
                if cfg.session_api_key_env:
                    key = self._env.get(cfg.session_api_key_env) or None
                    if key is None:
                        raise AgentError(
                            "launch_failed",
                            f"openhands.session_api_key_env: ${cfg.session_api_key_env} is unset",
                        )
                url = cfg.base_url.rstrip("/")
                return await self._endpoint_for(url, key, cfg.ws_auth, None, timeout_s)
            if cfg.command:
                server = self._server
                if server is None or server.command != cfg.command or not server.running:
                    if server is not None:
                        await server.stop()
                    server = ManagedServer(
                        cfg.command,
                        self.state_dir,
                        env=self.server_env(cfg),
                        startup_timeout_s=cfg.startup_timeout_ms / 1000,
                    )
                    self._server = None
                    await server.start()
                    self._server = server
                assert server.base_url is not None
                return await self._endpoint_for(
                    server.base_url, server.api_key, cfg.ws_auth, server.pid, timeout_s
                )
            raise AgentError(
                "launch_failed", "openhands: set base_url (a running server) or command"
            )

    async def _endpoint_for(
        self, url: str, key: str | None, ws_auth: WsAuth, pid: int | None, timeout_s: float
    ) -> _Endpoint:
        ws_auth = ws_auth if key else "none"
        ep = self._endpoint
        if ep is not None and (ep.base_url, ep.api_key, ep.ws_auth) == (url, key, ws_auth):
            ep.pid = pid
            return ep
        if ep is not None and not self._sessions_use(ep.client):
            await ep.client.aclose()
        client = OpenHandsClient(url, api_key=key, timeout_s=timeout_s)
        self._endpoint = _Endpoint(url, key, ws_auth, client, pid)
        return self._endpoint

    def server_env(self, cfg: OpenHandsSettings) -> dict[str, str]:
        """The managed server's base environment: the backend's, with a clean ``HOME``
        under the state dir, overlaid by ``openhands.env`` (``$VAR`` values resolved)."""
        home = self.state_dir / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {**self._env, "HOME": str(home)}
        for key, value in cfg.env.items():
            resolved = self._resolve(str(value))
            if resolved is None:
                env.pop(key, None)
            else:
                env[key] = str(resolved)
        return env

    def _sessions_use(self, client: OpenHandsClient) -> bool:
        self._sessions = {s for s in self._sessions if not s.closed}
        return any(s.client is client for s in self._sessions)

    def _create_body(
        self, cfg: OpenHandsSettings, host: SessionHost, conversation_id: str | None
    ) -> dict[str, Any]:
        llm = {k: self._resolve(v) for k, v in cfg.llm.items()}
        llm.setdefault("usage_id", "agent")
        if not llm.get("model"):
            raise AgentError("launch_failed", "openhands.llm.model is required")
        body: dict[str, Any] = {
            "workspace": {"kind": "LocalWorkspace", "working_dir": str(host.workspace)},
            "agent_settings": {"llm": llm},
            "confirmation_policy": {"kind": cfg.confirmation_policy},
            "autotitle": False,
        }
        tools = client_tool_specs(host.tools)
        if tools:
            body["client_tools"] = tools
        if conversation_id:
            body["conversation_id"] = conversation_id
        return body

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("$"):
            return resolve_env(value, self._env)
        return value


def _options(cfg: OpenHandsSettings) -> StreamOptions:
    return StreamOptions(readiness_timeout_s=cfg.read_timeout_ms / 1000)
