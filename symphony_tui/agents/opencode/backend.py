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

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from secrets import token_urlsafe

import platformdirs

from symphony_tui.agents.base import AgentError, SessionHost
from symphony_tui.agents.local_server import health_answered, takeable
from symphony_tui.agents.opencode.client import OpenCodeClient, OpenCodeHTTPError
from symphony_tui.agents.opencode.server import REMOTE_STATE, ManagedServer, remote_script
from symphony_tui.agents.opencode.session import OpenCodeSession
from symphony_tui.agents.reconnect import StreamOptions
from symphony_tui.agents.remote_server import RemoteServer, host_launch
from symphony_tui.agents.server_link import Endpoint, ServerLink, session_started
from symphony_tui.config.child_env import ChildEnv
from symphony_tui.config.settings import OpenCodeSettings, Settings
from symphony_tui.hosts.ssh import HostTargets

REQUEST_TIMEOUT_S = 30.0


def default_state_dir() -> Path:
    """Where a managed server keeps its sessions: the user state dir (platformdirs)."""
    return Path(platformdirs.user_state_dir("symphony-tui")) / "opencode"


def parse_model(value: str | None) -> tuple[str, str] | None:
    """``"provider/model"`` -> ``(providerID, modelID)``; ``None`` stays ``None``.
    Raises ``AgentError("launch_failed")`` for a value without both parts."""
    if not value:
        return None
    provider, _, model = value.partition("/")
    if not provider or not model:
        raise AgentError("launch_failed", f"opencode.model {value!r} is not provider/model")
    return provider, model


class OpenCodeBackend:
    """Factory of :class:`OpenCodeSession`. ``env`` is the agents' base environment (laid
    over ``os.environ``); ``unset`` names never reach the server."""

    name = "opencode"

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
        self._env = dict(env or {})
        self._unset = frozenset(unset)
        self.state_dir = state_dir or default_state_dir()
        self._stream_options = stream_options
        self._link: ServerLink[ManagedServer, OpenCodeClient] = ServerLink()
        self._by_issue: dict[str, str] = {}  # issue id -> session id
        self._targets = HostTargets(settings)

    @property
    def server(self) -> ManagedServer | None:
        """The managed server, when one is running."""
        return self._link.server

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

    def _recipe(self) -> ChildEnv:
        """The shared child-environment recipe (config/child_env.py) for this backend."""
        secrets = self._unset | set(self._settings().tracker.secret_env_names)
        return ChildEnv(self._env, secrets)

    async def start_session(self, host: SessionHost) -> OpenCodeSession:
        settings = self._settings()
        cfg = settings.opencode
        parse_model(cfg.model)  # a bad value fails before anything is launched
        worker_host = getattr(host, "worker_host", None)
        if worker_host is None:
            endpoint = await self._connect(cfg, Path(settings.workspace.root))
            return await self._open_session(host, endpoint, str(Path(host.workspace).resolve()))
        server, endpoint = await self._start_on_host(settings, worker_host, host.workspace)
        try:
            session = await self._open_session(
                host, endpoint, str(host.workspace), owned=(server, endpoint.client)
            )
        except BaseException:
            await endpoint.client.aclose()
            await server.stop()
            raise
        return session

    async def _start_on_host(
        self, settings: Settings, worker_host: str, workspace: Path
    ) -> tuple[RemoteServer, Endpoint[OpenCodeClient]]:
        """This session's own ``opencode serve`` on ``worker_host``, in ``workspace``
        (agents/remote_server.py), and a client through its port forward."""
        cfg = settings.opencode
        on_host = settings.worker.server_on(worker_host, "opencode")
        if on_host is not None:
            return await self._attach_on_host(cfg, worker_host, workspace, on_host)
        command, overrides = host_launch(
            settings, worker_host, "opencode", cfg.command, cfg.env, self._recipe()
        )
        password = token_urlsafe(24)
        server = RemoteServer(
            "opencode serve",
            self._targets(worker_host),
            str(workspace),
            command=command,
            state=REMOTE_STATE,
            startup_timeout_s=cfg.startup_timeout_ms / 1000,
        )
        await server.start(
            lambda port, log: remote_script(command, port, log, overrides),
            probe=lambda url: OpenCodeClient(url, password=password),
            stdin=f"{password}\n".encode(),
        )
        assert server.base_url is not None
        client = OpenCodeClient(server.base_url, password=password, timeout_s=REQUEST_TIMEOUT_S)
        return server, Endpoint(server.base_url, (password,), client, None)

    async def _attach_on_host(
        self,
        cfg: OpenCodeSettings,
        worker_host: str,
        workspace: Path,
        on_host: tuple[str, int],
    ) -> tuple[RemoteServer, Endpoint[OpenCodeClient]]:
        """A server run on ``worker_host`` by other means (``worker.hosts.<h>.base_url``),
        reached through a port forward; ``opencode.password_env`` names its password."""
        password = None
        if cfg.password_env:
            password = self._recipe().lookup(cfg.password_env)
            if password is None:
                raise AgentError(
                    "launch_failed", f"opencode.password_env: ${cfg.password_env} is unset"
                )
        server = RemoteServer(
            "opencode serve",
            self._targets(worker_host),
            str(workspace),
            command="",
            state=REMOTE_STATE,
            startup_timeout_s=cfg.startup_timeout_ms / 1000,
        )
        await server.attach(*on_host, probe=lambda url: OpenCodeClient(url, password=password))
        assert server.base_url is not None
        client = OpenCodeClient(server.base_url, password=password, timeout_s=REQUEST_TIMEOUT_S)
        return server, Endpoint(server.base_url, (password,), client, None)

    async def _open_session(
        self,
        host: SessionHost,
        endpoint: Endpoint[OpenCodeClient],
        directory: str,
        *,
        owned: tuple[RemoteServer, OpenCodeClient] | None = None,
    ) -> OpenCodeSession:
        """The issue's session on ``endpoint`` (re-attached when the server knows the
        recorded one), attached and reported. ``owned``: the session's own server on a
        worker host and its client, ended with the session."""
        cfg = self._settings().opencode
        model = parse_model(cfg.model)
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
        self._by_issue[host.issue.id] = sid
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
        if owned is not None:
            server, client = owned
            session.own(client.aclose)
            session.own(server.stop)
            server.on_lost = session.server_lost
        await self._link.adopt(session)
        resumed = previous == sid
        host.emit(
            session_started(
                "session",
                sid,
                endpoint.base_url,
                resumed=resumed,
                state=session.status,
                pending_approvals=len(session.pending.ids),
                directory=directory,
                interrupted_messages=len(session.stale),
            )
        )
        session.report_attached_usage()
        return session

    async def take_over_server(self) -> bool:
        """Start-up: take over the managed server a crashed scheduler left serving (its
        record in the state folder, :func:`~symphony_tui.agents.local_server.takeable`),
        so it serves this scheduler's sessions and ends with it, even when no issue of
        this start needs it. False when there is none to take. Raises ``AgentError``."""
        settings = self._settings()
        cfg = settings.opencode
        if cfg.base_url or not cfg.command or not takeable(self.state_dir / "server.json"):
            return False
        await self._connect(cfg, Path(settings.workspace.root))
        return True

    async def aclose(self) -> None:
        """Close every session and the client, then stop the managed server."""
        await self._link.aclose()

    # ------------------------------------------------------------ internals

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

    async def check_server(self, cwd: Path) -> str:
        """Reach the server as a session would (launching the managed one in ``cwd`` when
        ``opencode.command`` is set) and ask ``GET /global/health``; returns its base URL.
        Raises ``AgentError("launch_failed")``. For ``doctor``; :meth:`aclose` stops it."""
        endpoint = await self._connect(self._settings().opencode, cwd)
        if not await health_answered(endpoint.client):
            raise AgentError(
                "launch_failed", f"{endpoint.base_url}: GET /global/health is not healthy"
            )
        return endpoint.base_url

    async def _connect(
        self, cfg: OpenCodeSettings, workspace_root: Path
    ) -> Endpoint[OpenCodeClient]:
        async with self._link.lock:
            if cfg.base_url:
                password = None
                if cfg.password_env:
                    password = self._recipe().lookup(cfg.password_env)
                    if password is None:
                        raise AgentError(
                            "launch_failed", f"opencode.password_env: ${cfg.password_env} is unset"
                        )
                url, pid = cfg.base_url.rstrip("/"), None
            elif command := cfg.command:
                server = await self._link.managed_server(
                    command,
                    lambda: ManagedServer(
                        command,
                        self.state_dir,
                        cwd=workspace_root,
                        env=self.server_env(),
                        extra_env=self.extra_env(cfg),
                        startup_timeout_s=cfg.startup_timeout_ms / 1000,
                    ),
                )
                assert server.base_url is not None
                url, password, pid = server.base_url, server.password, server.pid
            else:
                raise AgentError(
                    "launch_failed", "opencode: set base_url (a running server) or command"
                )
            return await self._link.endpoint_for(
                url,
                (password,),
                pid,
                lambda: OpenCodeClient(url, password=password, timeout_s=REQUEST_TIMEOUT_S),
            )
