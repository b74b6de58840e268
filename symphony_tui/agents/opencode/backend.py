"""``agent.backend: opencode``: sessions on an OpenCode server (docs/protocols.md
"OpenCode server").

Two ways to reach a server, from the ``opencode:`` block of WORKFLOW.md:

* ``base_url`` - a running ``opencode serve``; ``password_env`` names the environment
  variable holding its ``OPENCODE_SERVER_PASSWORD`` (HTTP basic auth, user ``opencode``).
* ``command`` - a managed local server (e.g. ``opencode serve``), one per backend (that is,
  per scheduler), started on first use on a free loopback port in the workspace root,
  isolated under ``state_dir`` (see :mod:`.server`), probed with ``GET /global/health`` up
  to ``startup_timeout_ms`` and stopped with its process group by :meth:`aclose`. Sessions
  are stored under ``state_dir``, so after a console restart the next server finds them.
  Its environment is the scheduler's agent environment without the ``unset`` names (the
  scheduler's own secrets); ``opencode.env`` is laid over the isolated one (``$VAR`` values
  resolved, an unset variable removes the name, ``unset`` names stay out), so
  ``env: {HOME: $HOME}`` restores the user's home. The provider is configured the OpenCode way: the workspace's
  ``opencode.json``, or ``OPENCODE_CONFIG`` / ``OPENCODE_CONFIG_CONTENT`` in that
  environment (the user's global config is not read: the server has its own home).

On a worker host (the session host's ``worker_host``) each session starts its
own server in the workspace there (``opencode.command`` or the host's
``worker.hosts.<h>.commands.opencode``; :func:`.server.remote_script`,
agents/remote_server.py), reached through an SSH port forward and ended with the session.

One local server serves every workspace: each request names its workspace (``directory=``), which
is OpenCode's unit of project, config and event bus. ``opencode.model`` (``provider/model``)
is sent with every prompt; without it the server's configured default applies.

One OpenCode session per issue: its id, the server URL and the directory are recorded
through :meth:`SessionHost.record_session` (``session_id``, ``thread_id``, ``server_url``,
``directory``, ``backend="opencode"``) and re-attached on the next attempt or after a
restart (``host.resume``) when the server still knows it; otherwise a new one is created.

Client-side tools (``SessionHost.tools``) are not offered: OpenCode 1.18.33 has no way for
an HTTP client to define a tool (``prompt_async``'s ``tools`` only switches the server's
own tools on or off); see the package README section for what it would take.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs

from symphony_tui.agents.base import AgentError, SessionHost
from symphony_tui.agents.opencode.client import OpenCodeClient, OpenCodeHTTPError
from symphony_tui.agents.opencode.server import REMOTE_STATE, ManagedServer, remote_script
from symphony_tui.agents.opencode.session import OpenCodeSession
from symphony_tui.agents.server_backend import RemoteLaunchScript, ServerBackend
from symphony_tui.agents.server_link import Endpoint, session_started
from symphony_tui.config.settings import OpenCodeSettings, Settings
from symphony_tui.domain import AgentEvent

REQUEST_TIMEOUT_S = 30.0


def parse_model(value: str | None) -> tuple[str, str] | None:
    """``"provider/model"`` -> ``(providerID, modelID)``; ``None`` stays ``None``.
    Raises ``AgentError("launch_failed")`` for a value without both parts."""
    if not value:
        return None
    provider, _, model = value.partition("/")
    if not provider or not model:
        raise AgentError("launch_failed", f"opencode.model {value!r} is not provider/model")
    return provider, model


class OpenCodeBackend(
    ServerBackend[OpenCodeSettings, ManagedServer, OpenCodeClient, OpenCodeSession]
):
    """Factory of :class:`OpenCodeSession` (agents/server_backend.py). ``env`` is the
    agents' base environment (laid over ``os.environ``); ``unset`` names never reach the
    server."""

    name = "opencode"
    server_label = "opencode serve"
    secret_setting = "password_env"
    remote_state = REMOTE_STATE
    unhealthy = "GET /global/health is not healthy"

    @staticmethod
    def default_state_dir() -> Path:
        """Where a managed server keeps its sessions: the user state dir (platformdirs)."""
        return Path(platformdirs.user_state_dir("symphony-tui")) / "opencode"

    def server_env(self) -> dict[str, str]:
        """The managed server's base environment (before isolation, see :mod:`.server`):
        ``os.environ`` with the backend's ``env`` laid over it, without the secrets (the
        ``unset`` names and the workflow's ``tracker.secret_env_names``)."""
        return self._recipe().scrubbed()

    def extra_env(self, cfg: OpenCodeSettings) -> dict[str, str | None]:
        """``opencode.env`` with ``$VAR`` values resolved against :meth:`server_env`: name ->
        value, or ``None`` (remove it) for an empty or unset variable. Secret names are left
        out (the scheduler's secrets never reach the agent, not even by name)."""
        return self._recipe().overrides(cfg.env)

    # ------------------------------------------------------------ ServerBackend

    def _cfg(self, settings: Settings) -> OpenCodeSettings:
        return settings.opencode

    def _check(self, cfg: OpenCodeSettings) -> None:
        parse_model(cfg.model)  # a bad value fails before anything is launched

    def _secret_env(self, cfg: OpenCodeSettings) -> str | None:
        return cfg.password_env

    def _client(self, cfg: OpenCodeSettings, url: str, secret: str | None) -> OpenCodeClient:
        return OpenCodeClient(url, password=secret, timeout_s=REQUEST_TIMEOUT_S)

    def _managed(self, cfg: OpenCodeSettings, command: str, workspace_root: Path) -> ManagedServer:
        return ManagedServer(
            command,
            self.state_dir,
            cwd=workspace_root,
            env=self.server_env(),
            extra_env=self.extra_env(cfg),
            startup_timeout_s=cfg.startup_timeout_ms / 1000,
        )

    def _managed_secret(self, server: ManagedServer) -> str | None:
        return server.password

    def _remote_launch(
        self, command: str, secret: str, overrides: dict[str, str | None]
    ) -> RemoteLaunchScript:
        return (lambda port, log: remote_script(command, port, log, overrides)), None

    async def _create(
        self,
        host: SessionHost,
        endpoint: Endpoint[OpenCodeClient],
        secret: str | None,
        *,
        local: bool,
    ) -> tuple[OpenCodeSession, str | None]:
        """The session of ``host``'s workspace directory (OpenCode's unit of project)."""
        directory = str(Path(host.workspace).resolve()) if local else str(host.workspace)
        model = parse_model(self._settings().opencode.model)
        previous = self._previous(host, directory)
        info = None
        if previous:
            try:
                info = await endpoint.client.get_session(directory, previous)
            except OpenCodeHTTPError as e:
                if e.status not in (400, 404):
                    raise
        if info is None:
            title = f"{host.issue.identifier}: {host.issue.title}"
            info = await endpoint.client.create_session(directory, title[:200])
        sid = info["id"]
        host.record_session(
            session_id=sid,
            thread_id=sid,
            server_url=endpoint.base_url,
            directory=directory,
            backend="opencode",
        )
        session = OpenCodeSession(
            host,
            endpoint.client,
            sid,
            directory,
            model=model,
            stream_options=self._stream_options,
            pid=endpoint.pid,
            request_timeout_s=REQUEST_TIMEOUT_S,
        )
        return session, previous

    def _started(
        self, session: OpenCodeSession, endpoint: Endpoint[OpenCodeClient], *, resumed: bool
    ) -> AgentEvent:
        return session_started(
            "session",
            session.server_session_id,
            endpoint.base_url,
            resumed=resumed,
            state=session.status,
            pending_approvals=len(session.pending.ids),
            directory=session.directory,
            interrupted_messages=len(session.stale),
        )

    def _previous(self, host: SessionHost, directory: str) -> str | None:
        resume = dict(host.resume or {})
        recorded = None
        if resume.get("backend", "opencode") == "opencode" and resume.get("directory") in (
            None,
            directory,
        ):
            value = resume.get("session_id") or resume.get("thread_id")
            recorded = value if isinstance(value, str) and value.startswith("ses") else None
        return recorded or self._by_issue.get(host.issue.id)
