"""The backend of an HTTP agent server: where its sessions' server is and how a session opens.

Shared by the OpenHands and OpenCode backends (docs/protocols.md "OpenHands agent-server",
"OpenCode server"); each says only what is its own (settings section, clients, the managed
server, the remote launch script, how a server-side session is created or reopened).

A server is reached one of three ways:

* ``base_url`` of the backend's settings: a running server, its secret (password, API key)
  read from the variable its ``*_env`` setting names;
* ``command``: a managed local server started on first use under ``state_dir``, kept by
  :class:`~symphony_tui.agents.server_link.ServerLink` and taken over from a crashed
  scheduler (:meth:`ServerBackend.take_over_server`);
* on a worker host (the session host's ``worker_host``): the session's own server started
  in the workspace there, or one the host runs by other means
  (``worker.hosts.<h>.base_url``), reached through an SSH port forward
  (agents/remote_server.py) and ended with the session.

Errors: ``AgentError("launch_failed")`` for settings that name no server or an unset secret
variable; what the server, the client or the forward raise otherwise.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from pathlib import Path
from secrets import token_urlsafe
from typing import Generic, Protocol, TypeVar

from symphony_tui.agents.base import AgentError, SessionHost
from symphony_tui.agents.local_server import HealthProbe, health_answered, takeable
from symphony_tui.agents.reconnect import StreamOptions
from symphony_tui.agents.remote_server import RemoteServer, host_launch
from symphony_tui.agents.server_link import Endpoint, LinkedSession, ServerLink, ServerProcess
from symphony_tui.config.child_env import ChildEnv
from symphony_tui.config.settings import Settings
from symphony_tui.domain import AgentEvent
from symphony_tui.hosts.ssh import HostTargets


class ServerSettings(Protocol):
    """What the base reads of a backend's settings section."""

    @property
    def base_url(self) -> str | None: ...

    @property
    def command(self) -> str | None: ...

    @property
    def startup_timeout_ms(self) -> int: ...

    @property
    def env(self) -> dict[str, str]: ...


class ManagedProcess(ServerProcess, Protocol):
    """A managed local server once started (agents/local_server.py)."""

    base_url: str | None

    @property
    def pid(self) -> int | None: ...


class ServerSession(LinkedSession, Protocol):
    """What the base does with a session: an ``HttpServerSession``
    (agents/http_session.py) with its backend's ``attach``."""

    @property
    def server_session_id(self) -> str: ...

    def own(self, closer: Callable[[], Awaitable[None]]) -> None: ...

    def server_lost(self, error: AgentError, host_lost: str | None) -> None: ...

    def report_attached_usage(self) -> None: ...


CfgT = TypeVar("CfgT", bound=ServerSettings)
ServerT = TypeVar("ServerT", bound=ManagedProcess)
ClientT = TypeVar("ClientT", bound=HealthProbe)
SessionT = TypeVar("SessionT", bound=ServerSession)

#: A remote launch: ``script(port, log)`` (the command line the host runs) and the shell
#: command that also runs when the server is stopped (None: nothing more).
RemoteLaunchScript = tuple[Callable[[int, str], str], str | None]


class ServerBackend(ABC, Generic[CfgT, ServerT, ClientT, SessionT]):
    """Factory of sessions on one kind of HTTP agent server. ``env`` is the agents' base
    environment (laid over ``os.environ``); ``unset`` names never reach a server."""

    #: ``agent.backend`` value and settings section name (``opencode``).
    name: str
    #: The server as messages and the remote launcher name it (``opencode serve``).
    server_label: str
    #: The setting naming the secret's environment variable (``password_env``).
    secret_setting: str
    #: The server's state folder on a worker host, relative to the workspace.
    remote_state: str
    #: The health check's failure, after the base URL (``GET /health did not answer 200``).
    unhealthy: str

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
        self.state_dir = state_dir or self.default_state_dir()
        self._stream_options = stream_options
        self._link: ServerLink[ServerT, ClientT] = ServerLink()
        self._by_issue: dict[str, str] = {}  # issue id -> server-side session id
        self._targets = HostTargets(settings)

    # ------------------------------------------------------------ what each backend says

    @staticmethod
    @abstractmethod
    def default_state_dir() -> Path:
        """Where a managed server keeps its sessions when no ``state_dir`` is given."""

    @abstractmethod
    def _cfg(self, settings: Settings) -> CfgT:
        """This backend's settings section."""

    @abstractmethod
    def _secret_env(self, cfg: CfgT) -> str | None:
        """The name of the variable holding a given server's secret (None: no secret)."""

    @abstractmethod
    def _client(self, cfg: CfgT, url: str, secret: str | None) -> ClientT:
        """The client sessions use for the server at ``url``."""

    def _probe_client(self, cfg: CfgT, url: str, secret: str | None) -> ClientT:
        """The client that waits for a server on a worker host to answer."""
        return self._client(cfg, url, secret)

    def _identity(self, cfg: CfgT, secret: str | None) -> tuple[Hashable, ...]:
        """What, besides the URL, picks the client (:class:`Endpoint` ``identity``)."""
        return (secret,)

    @abstractmethod
    def _managed(self, cfg: CfgT, command: str, workspace_root: Path) -> ServerT:
        """A new managed local server running ``command`` (not started)."""

    @abstractmethod
    def _managed_secret(self, server: ServerT) -> str | None:
        """The secret a managed server was started with."""

    @abstractmethod
    def _remote_launch(
        self, command: str, secret: str, overrides: dict[str, str | None]
    ) -> RemoteLaunchScript:
        """How the session's own server starts on a worker host (``secret`` arrives on
        its stdin; ``overrides``: its environment changes)."""

    def _check(self, cfg: CfgT) -> None:
        """Refuse bad settings before anything is launched (raises ``AgentError``)."""

    @abstractmethod
    async def _create(
        self, host: SessionHost, endpoint: Endpoint[ClientT], secret: str | None, *, local: bool
    ) -> tuple[SessionT, str | None]:
        """The issue's server-side session on ``endpoint`` (the recorded one reopened when
        the server still knows it), recorded through ``host.record_session``, not yet
        attached; and the recorded id it tried (None: none). ``local``: the server runs on
        this machine."""

    @abstractmethod
    def _started(
        self, session: SessionT, endpoint: Endpoint[ClientT], *, resumed: bool
    ) -> AgentEvent:
        """The ``SESSION_STARTED`` event of an attached session."""

    # ------------------------------------------------------------ the shared part

    @property
    def server(self) -> ServerT | None:
        """The managed server, when one is running."""
        return self._link.server

    def _recipe(self) -> ChildEnv:
        """The shared child-environment recipe (config/child_env.py) for this backend."""
        secrets = self._unset | set(self._settings().tracker.secret_env_names)
        return ChildEnv(self._env, secrets)

    def _given_secret(self, cfg: CfgT) -> str | None:
        """The secret of a server this backend did not start; raises
        ``AgentError("launch_failed")`` when the named variable is unset."""
        name = self._secret_env(cfg)
        if not name:
            return None
        secret = self._recipe().lookup(name)
        if secret is None:
            raise AgentError(
                "launch_failed", f"{self.name}.{self.secret_setting}: ${name} is unset"
            )
        return secret

    async def start_session(self, host: SessionHost) -> SessionT:
        settings = self._settings()
        cfg = self._cfg(settings)
        self._check(cfg)
        worker_host = host.worker_host
        if worker_host is None:
            endpoint, secret = await self._connect(cfg, Path(settings.workspace.root))
            return await self._open_session(host, endpoint, secret, local=True)
        server, endpoint, secret = await self._start_on_host(settings, worker_host, host.workspace)
        try:
            return await self._open_session(
                host, endpoint, secret, local=False, owned=(server, endpoint.client)
            )
        except BaseException:
            await endpoint.client.aclose()
            await server.stop()
            raise

    async def _start_on_host(
        self, settings: Settings, worker_host: str, workspace: Path
    ) -> tuple[RemoteServer, Endpoint[ClientT], str | None]:
        """This session's own server on ``worker_host``, in ``workspace``
        (agents/remote_server.py), and a client through its port forward."""
        cfg = self._cfg(settings)
        on_host = settings.worker.server_on(worker_host, self.name)
        if on_host is not None:
            return await self._attach_on_host(cfg, worker_host, workspace, on_host)
        command, overrides = host_launch(
            settings, worker_host, self.name, cfg.command, cfg.env, self._recipe()
        )
        secret = token_urlsafe(24)
        script, extra_stop = self._remote_launch(command, secret, overrides)
        server = RemoteServer(
            self.server_label,
            self._targets(worker_host),
            str(workspace),
            command=command,
            state=self.remote_state,
            startup_timeout_s=cfg.startup_timeout_ms / 1000,
            extra_stop=extra_stop,
        )
        await server.start(
            script,
            probe=lambda url: self._probe_client(cfg, url, secret),
            stdin=f"{secret}\n".encode(),
        )
        return server, self._forwarded(cfg, server, secret), secret

    async def _attach_on_host(
        self, cfg: CfgT, worker_host: str, workspace: Path, on_host: tuple[str, int]
    ) -> tuple[RemoteServer, Endpoint[ClientT], str | None]:
        """A server run on ``worker_host`` by other means (``worker.hosts.<h>.base_url``),
        reached through a port forward; its secret is the one a ``base_url`` has."""
        secret = self._given_secret(cfg)
        server = RemoteServer(
            self.server_label,
            self._targets(worker_host),
            str(workspace),
            command="",
            state=self.remote_state,
            startup_timeout_s=cfg.startup_timeout_ms / 1000,
        )
        await server.attach(*on_host, probe=lambda url: self._probe_client(cfg, url, secret))
        return server, self._forwarded(cfg, server, secret), secret

    def _forwarded(self, cfg: CfgT, server: RemoteServer, secret: str | None) -> Endpoint[ClientT]:
        assert server.base_url is not None
        url = server.base_url
        return Endpoint(url, self._identity(cfg, secret), self._client(cfg, url, secret), None)

    async def _open_session(
        self,
        host: SessionHost,
        endpoint: Endpoint[ClientT],
        secret: str | None,
        *,
        local: bool,
        owned: tuple[RemoteServer, ClientT] | None = None,
    ) -> SessionT:
        """The issue's session on ``endpoint``, attached and reported. ``owned``: the
        session's own server on a worker host and its client, ended with the session."""
        session, previous = await self._create(host, endpoint, secret, local=local)
        self._by_issue[host.issue.id] = session.server_session_id
        if owned is not None:
            server, client = owned
            session.own(client.aclose)
            session.own(server.stop)
            server.on_lost = session.server_lost
        await self._link.adopt(session)
        resumed = previous == session.server_session_id
        host.emit(self._started(session, endpoint, resumed=resumed))
        session.report_attached_usage()
        return session

    async def take_over_server(self) -> bool:
        """Start-up: take over the managed server a crashed scheduler left serving (its
        record in the state folder, :func:`~symphony_tui.agents.local_server.takeable`),
        so it serves this scheduler's sessions and ends with it, even when no issue of
        this start needs it. False when there is none to take. Raises ``AgentError``."""
        settings = self._settings()
        cfg = self._cfg(settings)
        if cfg.base_url or not cfg.command or not takeable(self.state_dir / "server.json"):
            return False
        await self._connect(cfg, Path(settings.workspace.root))
        return True

    async def aclose(self) -> None:
        """Close every session and the client, then stop the managed server."""
        await self._link.aclose()

    async def check_server(self, cwd: Path | None = None) -> str:
        """Reach the server as a session would (launching the managed one, in ``cwd``
        when given, when ``command`` is set) and ask its health; returns its base URL.
        Raises ``AgentError("launch_failed")``. For ``doctor``; :meth:`aclose` stops
        what it started."""
        settings = self._settings()
        root = cwd if cwd is not None else Path(settings.workspace.root)
        endpoint, _secret = await self._connect(self._cfg(settings), root)
        if not await health_answered(endpoint.client):
            raise AgentError("launch_failed", f"{endpoint.base_url}: {self.unhealthy}")
        return endpoint.base_url

    async def _connect(
        self, cfg: CfgT, workspace_root: Path
    ) -> tuple[Endpoint[ClientT], str | None]:
        """The endpoint of the configured server (``base_url``, else the managed one,
        started in ``workspace_root`` when it is not running) and its secret."""
        async with self._link.lock:
            if cfg.base_url:
                secret = self._given_secret(cfg)
                url, pid = cfg.base_url.rstrip("/"), None
            elif command := cfg.command:
                server = await self._link.managed_server(
                    command, lambda: self._managed(cfg, command, workspace_root)
                )
                assert server.base_url is not None
                url, pid, secret = server.base_url, server.pid, self._managed_secret(server)
            else:
                raise AgentError(
                    "launch_failed", f"{self.name}: set base_url (a running server) or command"
                )
            endpoint = await self._link.endpoint_for(
                url, self._identity(cfg, secret), pid, lambda: self._client(cfg, url, secret)
            )
            return endpoint, secret
