"""What an HTTP agent backend holds of its server: the managed process, one client, sessions.

Shared by the OpenHands and OpenCode backends (docs/protocols.md "OpenHands agent-server",
"OpenCode server"). A backend reaches its server either at a configured ``base_url`` or
through a managed local server it starts on first use; :class:`ServerLink` keeps

* the managed server, restarted when its command changed or its process died;
* one client per endpoint (URL and credentials): a new endpoint gets a new client, and the
  old one is closed unless a live session still uses it;
* the live sessions, so :meth:`ServerLink.aclose` ends them, the client and the server.

How the URL, the credentials and the server's environment are found stays in each backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import SessionStarted


class ServerProcess(Protocol):
    """A managed server (see :mod:`symphony_tui.agents.local_server`)."""

    @property
    def command(self) -> str: ...

    @property
    def running(self) -> bool: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Client(Protocol):
    async def aclose(self) -> None: ...


class LinkedSession(Protocol):
    """A backend session: attached once, closed once; ``client`` is the one it calls."""

    @property
    def client(self) -> Any: ...

    @property
    def closed(self) -> bool: ...

    async def attach(self) -> None: ...

    async def close(self) -> None: ...


ServerT = TypeVar("ServerT", bound=ServerProcess)
ClientT = TypeVar("ClientT", bound=Client)


@dataclass
class Endpoint(Generic[ClientT]):
    """A server as the backend reaches it. ``identity`` is the URL plus whatever picks the
    client (credentials, modes); ``pid`` is the managed server's process id, else ``None``."""

    base_url: str
    identity: tuple[Hashable, ...]
    client: ClientT
    pid: int | None


class ServerLink(Generic[ServerT, ClientT]):
    """The managed server, the current endpoint and the live sessions of one backend.
    ``lock`` serializes connecting and closing; hold it around :meth:`managed_server` and
    :meth:`endpoint_for`."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.server: ServerT | None = None
        self.endpoint: Endpoint[ClientT] | None = None
        self._sessions: set[LinkedSession] = set()

    async def managed_server(self, command: str, make: Callable[[], ServerT]) -> ServerT:
        """The running managed server for ``command``: the current one, or (when there is
        none, its command differs or it has exited) the old one stopped and ``make()``
        started. Errors of ``start()`` propagate; no server is kept then."""
        server = self.server
        if server is not None and server.command == command and server.running:
            return server
        if server is not None:
            await server.stop()
        self.server = None
        server = make()
        await server.start()
        self.server = server
        return server

    async def endpoint_for(
        self,
        base_url: str,
        identity: tuple[Hashable, ...],
        pid: int | None,
        make_client: Callable[[], ClientT],
    ) -> Endpoint[ClientT]:
        """The endpoint for ``base_url`` + ``identity``: the current one (its ``pid``
        updated) when they match, else a new one with ``make_client()``."""
        ep = self.endpoint
        if ep is not None and (ep.base_url, ep.identity) == (base_url, identity):
            ep.pid = pid
            return ep
        if ep is not None and not self._in_use(ep.client):
            await ep.client.aclose()
        self.endpoint = Endpoint(base_url, identity, make_client(), pid)
        return self.endpoint

    async def adopt(self, session: LinkedSession) -> None:
        """Attach ``session`` and keep it; if attaching fails it is closed and the error
        propagates."""
        try:
            await session.attach()
        except BaseException:
            await session.close()
            raise
        self._prune()
        self._sessions.add(session)

    async def aclose(self) -> None:
        """Close every live session, the endpoint's client, then stop the managed server."""
        for session in list(self._sessions):
            await session.close()
        self._sessions.clear()
        async with self.lock:
            if self.endpoint is not None:
                await self.endpoint.client.aclose()
                self.endpoint = None
            if self.server is not None:
                await self.server.stop()
                self.server = None

    def _prune(self) -> None:
        self._sessions = {s for s in self._sessions if not s.closed}

    def _in_use(self, client: object) -> bool:
        self._prune()
        return any(s.client is client for s in self._sessions)


def session_started(
    noun: str,
    session_id: str,
    server_url: str,
    *,
    resumed: bool,
    state: str,
    pending_approvals: int,
    directory: str | None = None,
    interrupted_messages: int | None = None,
) -> AgentEvent:
    """The ``SESSION_STARTED`` event for the server-side session ``session_id`` (a ``noun``
    like ``"conversation"``) in server state ``state``: message ``"started <noun> <id>
    (<state>)"`` or ``"re-attached to ..."``; payload ``thread_id`` / ``session_id`` (both
    the id), ``server_url``, ``resumed``, ``state`` and the approvals already pending."""
    verb = "re-attached to" if resumed else "started"
    return AgentEvent(
        kind=EventKind.SESSION_STARTED,
        message=f"{verb} {noun} {session_id} ({state})",
        session_id=session_id,
        payload=SessionStarted(
            thread_id=session_id,
            session_id=session_id,
            server_url=server_url,
            resumed=resumed,
            state=state,
            pending_approvals=pending_approvals,
            directory=directory,
            interrupted_messages=interrupted_messages,
        ),
    )
