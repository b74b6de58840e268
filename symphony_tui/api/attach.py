"""What ``symphony-tui attach`` connects to: an ``http://`` API directly, or a scheduler on
another host through an SSH forward (:mod:`symphony_tui.api.ssh`). :func:`open_attach`
checks the API answers before the console starts; :meth:`Attachment.port` makes the
:class:`~symphony_tui.api.client.RemotePort` the console runs on. :func:`workflow_finder`
and :func:`host_finder` find the scheduler again after a restart (the same discovery the
attach used; :mod:`symphony_tui.api.follow` moves the console to it), :func:`address_finder`
a new scheduler answering at a fixed ``http(s)://`` address once the one there stopped."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from symphony_tui.api import discovery
from symphony_tui.api.announce import Owner
from symphony_tui.api.auth import find_control_token, is_loopback
from symphony_tui.api.client import RING, RemoteError, RemotePort, Unauthorized
from symphony_tui.api.ssh import SshTunnel, choose, discover, parse_target
from symphony_tui.config.worker_hosts import HostSpec
from symphony_tui.hosts.ssh import SshError

if TYPE_CHECKING:
    from symphony_tui.domain import AgentEvent


class AttachError(Exception):
    """Attaching failed before the console started (one line)."""


@dataclass
class Attachment:
    url: str
    token: str | None
    mode: Literal["stream", "poll"]
    tunnel: SshTunnel | None = None
    label: str = ""
    control: str | None = None  # the scheduler's control token, when this user can read it
    #: The scheduler's process, when it runs on this machine for this user.
    owner: Owner | None = None
    #: Its process id and its workflow file on its host, when its API note says them.
    pid: int | None = None
    workflow: str | None = None
    #: When its scheduler process started (its snapshot's ``started_at``), once probed.
    started_at: datetime | None = None

    def port(
        self,
        *,
        on_events: Callable[[list[AgentEvent]], None] | None = None,
        ring: int = RING,
    ) -> RemotePort:
        """A fresh :class:`RemotePort` (its HTTP client belongs to the loop that uses it);
        ``on_events`` and ``ring`` as :class:`RemotePort` takes them."""
        client = self.tunnel.client() if self.tunnel is not None else None
        return RemotePort(
            self.url,
            client=client,
            token=self.token,
            mode=self.mode,
            control=self.control,
            owner=self.owner,
            on_events=on_events,
            ring=ring,
        )

    def close(self) -> None:
        if self.tunnel is not None:
            self.tunnel.close()

    def __str__(self) -> str:
        return self.label or self.url


def open_attach(
    url: str | None,
    *,
    ssh: str | None = None,
    api_port: int | None = None,
    token: str | None = None,
    mode: Literal["stream", "poll"] = "stream",
) -> Attachment:
    """Resolve ``url`` (``http(s)://...`` or ``ssh://[user@]host[:port]``) or ``ssh``
    (``[user@]host``), open the forward when it is SSH, and probe the API once. The
    control token (docs/security.md), and the bearer token a console's scheduler generated,
    are read beside the scheduler's API note: on this machine for a loopback ``http://``
    URL, over ssh for ``ssh://``. That generated token is the only one such a scheduler
    accepts, so it goes first; else ``token`` (a scheduler taking its token from its
    operator's variable). Raises :class:`AttachError`."""
    if ssh and url:
        raise AttachError("give either a URL or --ssh, not both")
    if not ssh and not url:
        raise AttachError("give the scheduler's URL (http://HOST:PORT or ssh://HOST)")
    text = ssh or url or ""
    attachment: Attachment
    if ssh or text.startswith("ssh://"):
        try:
            target = parse_target(text)
            notes = discover(target)
            port = choose(notes if api_port is None else [], target, api_port=api_port)
            tunnel = SshTunnel(target, port).open()
        except (ValueError, SshError) as exc:
            raise AttachError(str(exc)) from None
        note = next((n for n in notes if n.get("port") == port), {})
        attachment = _host_attachment(target, port, note, tunnel, token, mode)
    elif text.startswith(("http://", "https://")):
        attachment = _url_attachment(text, token, mode)
    else:
        raise AttachError(f"{text!r} is not http://HOST:PORT or ssh://[user@]host[:port]")
    try:
        asyncio.run(_probe(attachment))
    except RemoteError as exc:
        attachment.close()
        raise AttachError(str(exc)) from None
    return attachment


def _url_attachment(url: str, token: str | None, mode: Literal["stream", "poll"]) -> Attachment:
    """An attachment to the scheduler at an ``http(s)://`` ``url``, with what this user's API
    note says of it when it runs on this machine (its tokens, its process, its workflow)."""
    local = _local_note(url)
    workflow = local.get("workflow") if local is not None else None
    pid = local.get("pid") if local is not None else None
    return Attachment(
        url,
        _local_token(url) or token,
        mode,
        control=_local_control(url),
        owner=_local_owner(url),
        pid=pid if isinstance(pid, int) else None,
        workflow=workflow if isinstance(workflow, str) else None,
    )


def _host_attachment(
    target: HostSpec,
    port: int,
    note: dict[str, Any],
    tunnel: SshTunnel,
    token: str | None,
    mode: Literal["stream", "poll"],
) -> Attachment:
    """The scheduler of ``note`` (API ``port``) on an ssh host, through ``tunnel`` (open)."""
    pid, workflow = note.get("pid"), note.get("workflow")
    return Attachment(
        tunnel.base_url,
        # a console's scheduler generated its bearer token and keeps it beside its note
        note.get("api_token") or token,
        mode,
        tunnel=tunnel,
        label=f"{target.name} (API port {port})",
        control=note.get("control_token"),
        pid=pid if isinstance(pid, int) else None,
        workflow=workflow if isinstance(workflow, str) else None,
    )


def env_token() -> str | None:
    """``$SYMPHONY_API_TOKEN``: the token for a scheduler of this user whose note offers
    none (it takes its token from its operator's variable, ``server.auth_token_env``)."""
    return os.environ.get("SYMPHONY_API_TOKEN") or None


def workflow_attachment(endpoint: discovery.Endpoint) -> Attachment:
    """An attachment to a scheduler found on this machine (its API note's address, its
    tokens, else :func:`env_token`, its process)."""
    assert endpoint.url is not None
    return Attachment(
        endpoint.url,
        endpoint.token or env_token(),
        "stream",
        label=f"pid {endpoint.pid} ({endpoint.url})",
        control=endpoint.control,
        owner=endpoint.owner,
        pid=endpoint.pid,
        workflow=endpoint.workflow_path or None,
    )


def _same_scheduler(current: Attachment, pid: object, port: object) -> bool:
    """Whether ``pid`` on API ``port`` is the scheduler ``current`` reaches (a forward's
    URL names the far end's port)."""
    try:
        current_port = urlsplit(current.url).port
    except ValueError:
        current_port = None
    return (pid, port) == (current.pid, current_port)


def workflow_finder(path: str) -> Callable[[Attachment], Attachment | None]:
    """A :data:`~symphony_tui.api.follow.Finder` of the scheduler running the workflow at
    ``path`` on this machine (:func:`~symphony_tui.api.discovery.workflow_endpoint`)."""

    def find(current: Attachment) -> Attachment | None:
        try:
            endpoint = discovery.workflow_endpoint(path)
        except discovery.NotRunning as exc:
            raise AttachError(str(exc)) from None
        if _same_scheduler(current, endpoint.pid, endpoint.api_port):
            return None
        return workflow_attachment(endpoint)

    return find


def host_finder(
    target: HostSpec,
    workflow: str | None,
    *,
    token: str | None = None,
    mode: Literal["stream", "poll"] = "stream",
) -> Callable[[Attachment], Attachment | None]:
    """A :data:`~symphony_tui.api.follow.Finder` of the scheduler of ``workflow`` (None:
    the one scheduler there) on an ssh host, each look one ``ssh`` run; a new one gets a
    forward of its own. An ssh that fails says nothing about the scheduler (None)."""

    def find(current: Attachment) -> Attachment | None:
        try:
            notes = discover(target)
        except SshError:
            return None
        if workflow is not None:
            notes = [n for n in notes if n.get("workflow") == workflow]
        if not notes:
            what = f"no scheduler of {workflow}" if workflow else "no scheduler"
            raise AttachError(f"{target.name}: {what} runs there now")
        if len(notes) > 1:
            return None  # several, none named: not this console's to choose
        note = notes[0]
        if _same_scheduler(current, note.get("pid"), note.get("port")):
            return None
        port = int(note["port"])
        try:
            tunnel = SshTunnel(target, port).open()
        except SshError:
            return None
        return _host_attachment(target, port, note, tunnel, token, mode)

    return find


def address_finder(
    url: str, *, token: str | None = None, mode: Literal["stream", "poll"] = "stream"
) -> Callable[[Attachment], Attachment | None]:
    """A :data:`~symphony_tui.api.follow.Finder` of a scheduler answering at the fixed
    ``url`` (an ``http(s)://`` address), each look one fetch of its state. Another process
    is one whose snapshot's ``started_at`` differs from ``current``'s (and, on this
    machine, whose API note names another pid); a scheduler still answering 503
    ``scheduler_stopping`` is one shutting down, not a new one. Nothing answering raises
    :class:`AttachError`; an answer refusing this console's token is None."""

    def find(current: Attachment) -> Attachment | None:
        found = _url_attachment(url, token, mode)
        if current.pid is not None and found.pid == current.pid:
            return None
        try:
            stopping = asyncio.run(_probe(found))
        except Unauthorized:
            return None  # something answers, but not to this console's token
        except RemoteError as exc:
            raise AttachError(str(exc)) from None
        if stopping or found.started_at == current.started_at:
            return None
        return found

    return find


def _local_control(url: str) -> str | None:
    """The control token of the scheduler behind a loopback ``url`` on this machine."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not parts.hostname or not is_loopback(parts.hostname):
        return None
    return find_control_token(port)


def _local_note(url: str) -> dict[str, Any] | None:
    """This user's API note of the scheduler behind a loopback ``url`` on this machine."""
    from symphony_tui.api import announce

    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    if port is None or not parts.hostname or not is_loopback(parts.hostname):
        return None
    return announce.note_for_port(announce.default_dir(), port)


def _local_token(url: str) -> str | None:
    """The API token this user's scheduler behind a loopback ``url`` generated and kept
    beside its note (a console's own API), so its printed address is enough to attach."""
    from symphony_tui.api import announce

    note = _local_note(url)
    return announce.read_token(note) if note is not None else None


def _local_owner(url: str) -> Owner | None:
    """The process of the scheduler behind a loopback ``url`` on this machine (found
    through this user's API notes), or None when it is not one of this user's."""
    from symphony_tui.api import announce

    note = _local_note(url)
    pid = note.get("pid") if note is not None else None
    return Owner.of(announce.default_dir(), pid) if isinstance(pid, int) else None


async def _probe(attachment: Attachment) -> bool:
    """Fetch the state once and note its ``started_at`` on ``attachment``. True when the
    scheduler answered that it is shutting down. Raises :class:`RemoteError`."""
    remote = attachment.port()
    try:
        await remote.refresh_once()
    finally:
        await remote.close()
    attachment.started_at = remote.snapshot().started_at
    return remote.stopped
