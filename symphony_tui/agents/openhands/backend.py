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

from pathlib import Path
from secrets import token_hex
from typing import Any

import platformdirs

from symphony_tui.agents.base import AgentError, SessionHost
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
from symphony_tui.agents.server_backend import RemoteLaunchScript, ServerBackend
from symphony_tui.agents.server_link import Endpoint, session_started
from symphony_tui.config.settings import OpenHandsSettings, Settings, resolve_env
from symphony_tui.domain import AgentEvent

#: Seconds a server on a worker host may take to answer one health probe.
PROBE_TIMEOUT_S = 2.0


class OpenHandsBackend(
    ServerBackend[OpenHandsSettings, ManagedServer, OpenHandsClient, OpenHandsSession]
):
    """Factory of :class:`OpenHandsSession` (agents/server_backend.py). ``env`` (laid over
    ``os.environ``) resolves ``$VAR`` settings and is the managed server's base
    environment; ``unset`` names never reach the server."""

    name = "openhands"
    server_label = "agent-server"
    secret_setting = "session_api_key_env"
    remote_state = REMOTE_STATE
    unhealthy = "GET /health did not answer 200"

    @staticmethod
    def default_state_dir() -> Path:
        """Where a managed server keeps its conversations: the user state dir (platformdirs)."""
        return Path(platformdirs.user_state_dir("symphony-tui")) / "openhands"

    def server_env(self, cfg: OpenHandsSettings) -> dict[str, str]:
        """The managed server's base environment: the backend's without the secrets, with a
        clean ``HOME`` under the state dir, overlaid by ``openhands.env`` (``$VAR`` values
        resolved; config/child_env.py)."""
        home = self.state_dir / "home"
        home.mkdir(parents=True, exist_ok=True)
        return self._recipe().build(cfg.env, defaults={"HOME": str(home)})

    # ------------------------------------------------------------ ServerBackend

    def _cfg(self, settings: Settings) -> OpenHandsSettings:
        return settings.openhands

    def _secret_env(self, cfg: OpenHandsSettings) -> str | None:
        return cfg.session_api_key_env

    def _client(self, cfg: OpenHandsSettings, url: str, secret: str | None) -> OpenHandsClient:
        return OpenHandsClient(url, api_key=secret, timeout_s=cfg.read_timeout_ms / 1000)

    def _probe_client(
        self, cfg: OpenHandsSettings, url: str, secret: str | None
    ) -> OpenHandsClient:
        return OpenHandsClient(url, api_key=secret, timeout_s=PROBE_TIMEOUT_S)

    def _identity(self, cfg: OpenHandsSettings, secret: str | None) -> tuple[str | None, WsAuth]:
        return secret, _ws_auth(cfg, secret)

    def _managed(self, cfg: OpenHandsSettings, command: str, workspace_root: Path) -> ManagedServer:
        return ManagedServer(
            command,
            self.state_dir,
            env=self.server_env(cfg),
            startup_timeout_s=cfg.startup_timeout_ms / 1000,
        )

    def _managed_secret(self, server: ManagedServer) -> str | None:
        return server.api_key

    def _remote_launch(
        self, command: str, secret: str, overrides: dict[str, str | None]
    ) -> RemoteLaunchScript:
        # Short: tmux sockets have a path length limit; private to this run.
        tmux_dir = f"/tmp/sym-oh-{token_hex(6)}"

        def script(port: int, log: str) -> str:
            return remote_script(command, port, log, tmux_dir, overrides)

        return script, remote_tmux_stop(tmux_dir)

    async def _create(
        self,
        host: SessionHost,
        endpoint: Endpoint[OpenHandsClient],
        secret: str | None,
        *,
        local: bool,
    ) -> tuple[OpenHandsSession, str | None]:
        """The issue's conversation (the recorded one reopened when it can be)."""
        cfg = self._settings().openhands
        ws_auth = _ws_auth(cfg, secret)
        resume = dict(host.resume or {})
        previous = None
        if resume.get("backend", "openhands") == "openhands":
            previous = resume.get("conversation_id")
        previous = previous or self._by_issue.get(host.issue.id)
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
        return session, previous

    def _started(
        self, session: OpenHandsSession, endpoint: Endpoint[OpenHandsClient], *, resumed: bool
    ) -> AgentEvent:
        return session_started(
            "conversation",
            session.server_session_id,
            endpoint.base_url,
            resumed=resumed,
            state=session.status,
            pending_approvals=len(session.pending_actions),
        )

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


def _ws_auth(cfg: OpenHandsSettings, secret: str | None) -> WsAuth:
    """How the event socket authenticates: ``openhands.ws_auth``, ``none`` without a key."""
    return cfg.ws_auth if secret else "none"


def _options(cfg: OpenHandsSettings) -> StreamOptions:
    return StreamOptions(readiness_timeout_s=cfg.read_timeout_ms / 1000)
