"""``agent.backend: openhands``: sessions on an OpenHands agent-server (docs/protocols.md).

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
  is laid over that environment (``$VAR`` values resolved, an unset variable removes the
  name), so ``env: {HOME: $HOME}`` restores the user's home (git identity, credentials)
  when its rc files are fast. The scheduler's secrets (``unset`` and the workflow's
  ``tracker.secret_env_names``) never reach the server: the shared recipe of
  :mod:`symphony_tui.config.child_env`.

On a worker host (the session host's ``worker_host``) each session starts its
own server in the workspace there (``openhands.command`` or the host's
``worker.hosts.<h>.commands.openhands``; :func:`.server.remote_script`,
agents/remote_server.py) and reaches it through an SSH port forward; the session ends it.

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

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from secrets import token_hex, token_urlsafe
from typing import Any

import platformdirs

from symphony_tui.agents.base import AgentError, SessionHost
from symphony_tui.agents.local_server import health_answered, takeable
from symphony_tui.agents.openhands.client import OpenHandsClient, OpenHandsHTTPError
from symphony_tui.agents.openhands.client_tools import client_tool_specs
from symphony_tui.agents.openhands.server import (
    REMOTE_STATE,
    ManagedServer,
    remote_script,
    remote_tmux_stop,
)
from symphony_tui.agents.openhands.session import OpenHandsSession
from symphony_tui.agents.openhands.stream import WsAuth
from symphony_tui.agents.reconnect import StreamOptions
from symphony_tui.agents.remote_server import RemoteServer, host_launch
from symphony_tui.agents.server_link import Endpoint, ServerLink, session_started
from symphony_tui.config.child_env import ChildEnv
from symphony_tui.config.settings import OpenHandsSettings, Settings, resolve_env
from symphony_tui.hosts.ssh import HostTargets


def default_state_dir() -> Path:
    """Where a managed server keeps its conversations: the user state dir (platformdirs)."""
    return Path(platformdirs.user_state_dir("symphony-tui")) / "openhands"


class OpenHandsBackend:
    """Factory of :class:`OpenHandsSession`. ``env`` (laid over ``os.environ``) resolves
    ``$VAR`` settings and is the managed server's base environment; ``unset`` names never
    reach the server."""

    name = "openhands"

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        env: Mapping[str, str] | None = None,
        unset: Iterable[str] = (),
        state_dir: Path | None = None,
        stream_options: StreamOptions | None = None,
    ) -> None:
        self._settings = settings
        self._env = dict(os.environ if env is None else env)
        self._unset = frozenset(unset)
        self.state_dir = state_dir or default_state_dir()
        self._stream_options = stream_options
        self._link: ServerLink[ManagedServer, OpenHandsClient] = ServerLink()
        self._conversations: dict[str, str] = {}  # issue id -> conversation id
        self._targets = HostTargets(settings)

    @property
    def server(self) -> ManagedServer | None:
        """The managed server, when one is running."""
        return self._link.server

    async def start_session(self, host: SessionHost) -> OpenHandsSession:
        settings = self._settings()
        worker_host = getattr(host, "worker_host", None)
        if worker_host is None:
            endpoint, ws_auth = await self._connect(settings.openhands)
            return await self._open_session(host, endpoint, ws_auth)
        server, endpoint, ws_auth = await self._start_on_host(settings, worker_host, host.workspace)
        try:
            return await self._open_session(
                host, endpoint, ws_auth, owned=(server, endpoint.client)
            )
        except BaseException:
            await endpoint.client.aclose()
            await server.stop()
            raise

    async def _start_on_host(
        self, settings: Settings, worker_host: str, workspace: Path
    ) -> tuple[RemoteServer, Endpoint[OpenHandsClient], WsAuth]:
        """This session's own agent-server on ``worker_host``, in ``workspace``
        (agents/remote_server.py), and a client through its port forward."""
        cfg = settings.openhands
        on_host = settings.worker.server_on(worker_host, "openhands")
        if on_host is not None:
            return await self._attach_on_host(cfg, worker_host, workspace, on_host)
        command, overrides = host_launch(
            settings, worker_host, "openhands", cfg.command, cfg.env, self._recipe()
        )
        key = token_urlsafe(24)
        # Short: tmux sockets have a path length limit; private to this run.
        tmux_dir = f"/tmp/sym-oh-{token_hex(6)}"
        server = RemoteServer(
            "agent-server",
            self._targets(worker_host),
            str(workspace),
            command=command,
            state=REMOTE_STATE,
            startup_timeout_s=cfg.startup_timeout_ms / 1000,
            extra_stop=remote_tmux_stop(tmux_dir),
        )
        await server.start(
            lambda port, log: remote_script(command, port, log, tmux_dir, overrides),
            probe=lambda url: OpenHandsClient(url, api_key=key, timeout_s=2.0),
            stdin=f"{key}\n".encode(),
        )
        assert server.base_url is not None
        url = server.base_url
        client = OpenHandsClient(url, api_key=key, timeout_s=cfg.read_timeout_ms / 1000)
        ws_auth: WsAuth = cfg.ws_auth
        return server, Endpoint(url, (key, ws_auth), client, None), ws_auth

    async def _attach_on_host(
        self,
        cfg: OpenHandsSettings,
        worker_host: str,
        workspace: Path,
        on_host: tuple[str, int],
    ) -> tuple[RemoteServer, Endpoint[OpenHandsClient], WsAuth]:
        """A server run on ``worker_host`` by other means (``worker.hosts.<h>.base_url``),
        reached through a port forward; ``openhands.session_api_key_env`` names its key."""
        key = None
        if cfg.session_api_key_env:
            key = self._recipe().lookup(cfg.session_api_key_env)
            if key is None:
                raise AgentError(
                    "launch_failed",
                    f"openhands.session_api_key_env: ${cfg.session_api_key_env} is unset",
                )
        server = RemoteServer(
            "agent-server",
            self._targets(worker_host),
            str(workspace),
            command="",
            state=REMOTE_STATE,
            startup_timeout_s=cfg.startup_timeout_ms / 1000,
        )
        await server.attach(
            *on_host, probe=lambda url: OpenHandsClient(url, api_key=key, timeout_s=2.0)
        )
        assert server.base_url is not None
        url = server.base_url
        client = OpenHandsClient(url, api_key=key, timeout_s=cfg.read_timeout_ms / 1000)
        ws_auth: WsAuth = cfg.ws_auth if key else "none"
        return server, Endpoint(url, (key, ws_auth), client, None), ws_auth

    async def _open_session(
        self,
        host: SessionHost,
        endpoint: Endpoint[OpenHandsClient],
        ws_auth: WsAuth,
        *,
        owned: tuple[RemoteServer, OpenHandsClient] | None = None,
    ) -> OpenHandsSession:
        """The issue's conversation on ``endpoint`` (the recorded one reopened when it
        can be), attached and reported. ``owned``: the session's own server on a worker
        host and its client, ended with the session."""
        cfg = self._settings().openhands
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
            ws_auth=ws_auth,
            backend="openhands",
        )
        session = OpenHandsSession(
            host,
            endpoint.client,
            cid,
            ws_auth=ws_auth,
            stream_options=self._stream_options or _options(cfg),
            pid=endpoint.pid,
            request_timeout_s=cfg.read_timeout_ms / 1000,
        )
        if owned is not None:
            server, client = owned
            session.own(client.aclose)
            session.own(server.stop)
            server.on_lost = session.server_lost
        await self._link.adopt(session)
        resumed = previous == cid
        host.emit(
            session_started(
                "conversation",
                cid,
                endpoint.base_url,
                resumed=resumed,
                state=session.status,
                pending_approvals=len(session.pending_actions),
            )
        )
        session.report_attached_usage()
        return session

    async def take_over_server(self) -> bool:
        """Start-up: take over the managed server a crashed scheduler left serving (its
        record in the state folder, :func:`~symphony_tui.agents.local_server.takeable`),
        so it serves this scheduler's conversations and ends with it, even when no issue
        of this start needs it. False when there is none to take. Raises ``AgentError``."""
        cfg = self._settings().openhands
        if cfg.base_url or not cfg.command or not takeable(self.state_dir / "server.json"):
            return False
        await self._connect(cfg)
        return True

    async def aclose(self) -> None:
        """Close every session and the client, then stop the managed server."""
        await self._link.aclose()

    # ------------------------------------------------------------ internals

    async def check_server(self) -> str:
        """Reach the server as a session would (launching the managed one when
        ``openhands.command`` is set) and ask ``GET /health``; returns its base URL. Raises
        ``AgentError("launch_failed")``. For ``doctor``; :meth:`aclose` stops what it started."""
        endpoint, _ws_auth = await self._connect(self._settings().openhands)
        if not await health_answered(endpoint.client):
            raise AgentError(
                "launch_failed", f"{endpoint.base_url}: GET /health did not answer 200"
            )
        return endpoint.base_url

    async def _connect(self, cfg: OpenHandsSettings) -> tuple[Endpoint[OpenHandsClient], WsAuth]:
        """The endpoint and the event socket's auth mode (``none`` without a key)."""
        async with self._link.lock:
            if cfg.base_url:
                key = None
                if cfg.session_api_key_env:
                    key = self._recipe().lookup(cfg.session_api_key_env)
                    if key is None:
                        raise AgentError(
                            "launch_failed",
                            f"openhands.session_api_key_env: ${cfg.session_api_key_env} is unset",
                        )
                url, pid = cfg.base_url.rstrip("/"), None
            elif command := cfg.command:
                server = await self._link.managed_server(
                    command,
                    lambda: ManagedServer(
                        command,
                        self.state_dir,
                        env=self.server_env(cfg),
                        startup_timeout_s=cfg.startup_timeout_ms / 1000,
                    ),
                )
                assert server.base_url is not None
                url, key, pid = server.base_url, server.api_key, server.pid
            else:
                raise AgentError(
                    "launch_failed", "openhands: set base_url (a running server) or command"
                )
            ws_auth: WsAuth = cfg.ws_auth if key else "none"
            timeout_s = cfg.read_timeout_ms / 1000
            endpoint = await self._link.endpoint_for(
                url,
                (key, ws_auth),
                pid,
                lambda: OpenHandsClient(url, api_key=key, timeout_s=timeout_s),
            )
            return endpoint, ws_auth

    def server_env(self, cfg: OpenHandsSettings) -> dict[str, str]:
        """The managed server's base environment: the backend's without the secrets, with a
        clean ``HOME`` under the state dir, overlaid by ``openhands.env`` (``$VAR`` values
        resolved; config/child_env.py)."""
        home = self.state_dir / "home"
        home.mkdir(parents=True, exist_ok=True)
        return self._recipe().build(cfg.env, defaults={"HOME": str(home)})

    def _recipe(self) -> ChildEnv:
        secrets = self._unset | set(self._settings().tracker.secret_env_names)
        return ChildEnv(self._env, secrets)

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
        # Against the scrubbed environment: a tracker secret never reaches the LLM settings.
        if isinstance(value, str) and value.startswith("$"):
            return resolve_env(value, self._recipe().scrubbed())
        return value


def _options(cfg: OpenHandsSettings) -> StreamOptions:
    return StreamOptions(readiness_timeout_s=cfg.read_timeout_ms / 1000)
