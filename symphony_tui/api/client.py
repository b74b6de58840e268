"""A :class:`~symphony_tui.scheduler.port.SchedulerPort` that talks to a scheduler's HTTP API,
so the console can attach to ``symphony-tui --headless --port N`` (over SSH, say).

``snapshot()`` and ``events_since()`` answer from a cache that :meth:`RemotePort.run` keeps
fresh from the pushed event stream (``GET /api/v1/stream``, :mod:`symphony_tui.api.stream`),
reconnecting with ``Last-Event-ID`` after a jittered backoff; a server without the stream
(404/405) or ``mode="poll"`` is polled instead (snapshot + events a few times a second).
``send()`` posts the command. Transcripts are fetched for the issues the console asked
about recently. :meth:`RemotePort.link` says how fresh the cache is, and whether the
scheduler has stopped: its stream's last ``stopping`` frame says so (a poll is answered 503
``scheduler_stopping`` instead), or, on this machine,
its ``owner`` process no longer serves once the link is lost (``said_stopping`` tells the
first two from this one, after which its agents may still run). A stopped
scheduler's snapshot keeps its history but no live rows (nothing runs there any more;
``before_stop`` is the snapshot as it was), and :meth:`RemotePort.run` returns.

A scheduler started again on the same workflow numbers its events on from its history file
and hands back the newest of it first (``scheduler/history/eventlog.py``). Events up to the
last one a client took from an earlier process of that workflow (:class:`Taken`, kept by
each port and handed to the next one by whoever follows a restart) are not taken again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import random
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

import httpx
from httpx_sse import aconnect_sse
from pydantic import TypeAdapter

from symphony_tui.api.announce import Owner
from symphony_tui.api.auth import CONTROL_HEADER
from symphony_tui.api.operator_routes import OPERATOR_HEADER, VIA_HEADER
from symphony_tui.api.patching import PatchError, apply_change
from symphony_tui.domain import AgentEvent, ClaimState, Snapshot
from symphony_tui.domain.audit import AuditEntry
from symphony_tui.domain.commands import Command
from symphony_tui.domain.diff import DiffPage, WorkspaceDiff
from symphony_tui.scheduler.audit import local_operator
from symphony_tui.scheduler.port import CommandResult, SchedulerPort, TranscriptGap

_EVENTS = TypeAdapter(list[AgentEvent])
_AUDIT = TypeAdapter(list[AuditEntry])
POLL_S = 0.25
RING = 5_000
TRANSCRIPT = 2_000  # events kept of one issue's transcript
TRANSCRIPT_S = 1.0
ASKED_KEEP_S = 10.0
STALE_AFTER_S = 15.0  # three of the server's 5 s keepalives
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 10.0

LinkState = Literal["connecting", "live", "reconnecting", "stale", "stopped"]


def link_reason(exc: Exception | str) -> str:
    """One line for what broke a link. For a connection that failed, the system's reason in
    plain words with the address, first (``connection refused at 127.0.0.1:9``, ``name not
    resolved: build.example``, ``no route to 10.0.0.7:8080``, ``timed out connecting to
    ...``), then what it may mean in parentheses, since httpx's own message is "All
    connection attempts failed" or the raw ``[Errno N] ...`` text whatever happened; a
    TLS handshake that failed says so (``TLS handshake with 127.0.0.1:8443 failed (the
    server may speak plain http: ...)``), not the errno its error carries; a connection
    closed before or during the answer says so in words; else the error's own message;
    for one that has none (httpx's timeouts often do not), what happened in words, else
    its class name."""
    if isinstance(exc, str):
        return exc
    if isinstance(exc, httpx.TransportError):
        plain = _plain_os_reason(exc)
        if plain is not None:
            return plain
    if isinstance(exc, httpx.ConnectTimeout):
        return f"timed out connecting to {_address(exc)} (a host that does not answer)"
    if isinstance(exc, httpx.RemoteProtocolError):
        return _protocol_reason(str(exc))
    if str(exc):
        return str(exc)
    if isinstance(exc, httpx.TimeoutException):
        return "no answer in time (the scheduler is busy, stopped or unreachable)"
    return type(exc).__name__


def _protocol_reason(said: str) -> str:
    """httpx's words for a connection that ended before or during an answer, plainly."""
    if "without sending a response" in said:  # "Server disconnected without sending ..."
        return "the scheduler closed the connection without answering"
    if not said or "incomplete" in said or "without sending complete" in said:
        return "the connection closed mid-answer"
    return said


#: OpenSSL's reasons for a handshake answered by something that does not speak TLS.
_NOT_TLS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"}
)


def _tls_reason(cause: ssl.SSLError, at: str) -> str:
    """A TLS failure with ``at`` in plain words: a certificate not trusted, an answer that
    is not TLS (a plain-http server behind an ``https://`` address), else OpenSSL's
    reason."""
    if isinstance(cause, ssl.SSLCertVerificationError):
        why = cause.verify_message or "not trusted"
        return (
            f"TLS handshake with {at} failed: its certificate is refused ({why}; "
            "a self-signed certificate, or one for another name)"
        )
    reason = getattr(cause, "reason", None) or ""
    if reason in _NOT_TLS:
        return (
            f"TLS handshake with {at} failed (the server may speak plain http: "
            "try http:// instead of https://)"
        )
    words = reason.lower().replace("_", " ") if reason else type(cause).__name__
    return f"TLS handshake with {at} failed: {words}"


#: errno -> (what happened, what it may mean), for the system errors a link meets.
_ERRNO_WORDS: dict[int, tuple[str, str]] = {
    errno.ECONNREFUSED: (
        "connection refused at {at}",
        "nothing listens there: the scheduler stopped, or a wrong port",
    ),
    errno.EHOSTUNREACH: ("no route to {at}", "the host is down or cut off"),
    errno.ENETUNREACH: ("no route to {at}", "this machine has no network to it"),
    errno.ETIMEDOUT: ("timed out connecting to {at}", "a host that does not answer"),
    errno.ECONNRESET: ("connection reset by {at}", "the other end dropped the link"),
}


def _plain_os_reason(exc: httpx.TransportError) -> str | None:
    """The system error under ``exc`` in plain words (:func:`link_reason`), or None."""
    cause = _os_error(exc)
    if cause is None:
        return None
    at = _address(exc)
    if isinstance(cause, ssl.SSLError):  # its errno is OpenSSL's, not the system's
        return _tls_reason(cause, at)
    if isinstance(cause, socket.gaierror) or (cause.errno is not None and cause.errno < 0):
        host = at.rsplit(":", 1)[0] if at != "the scheduler" else at
        why = cause.strerror or "unknown name"
        return f"name not resolved: {host} ({why})"
    assert cause.errno is not None
    words = _ERRNO_WORDS.get(cause.errno)
    if words is not None:
        return f"{words[0].format(at=at)} ({words[1]})"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to {at}: {os.strerror(cause.errno)}"
    return None


def _address(exc: httpx.TransportError) -> str:
    """``host:port`` of the request ``exc`` failed on (``the scheduler`` when unknown)."""
    try:
        url = exc.request.url
    except RuntimeError:  # raised without its request
        return "the scheduler"
    host = url.host or "the scheduler"
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"{host}:{url.port or (443 if url.scheme == 'https' else 80)}"


def _os_error(exc: BaseException) -> OSError | None:
    """The system error (one with an ``errno``) that ``exc`` was raised from, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            return current
        current = current.__cause__ or current.__context__
    return None


@dataclass(frozen=True)
class Taken:
    """How far a client took one scheduler process's events: its workflow path, the
    newest time among them (an agent's own times can run a little behind the scheduler's,
    so the last event taken need not be the newest) and the last ``seq``. A later process
    of the same workflow repeats its history up to here."""

    workflow: str
    at: datetime
    seq: int

    def holds(self, workflow: str, event: AgentEvent) -> bool:
        """Whether ``event`` of a process serving ``workflow`` is one already taken: same
        workflow, numbered at or before ``seq`` and timed at or before ``at`` (a number
        the restarted process gave again, to a later event, is new). Untimed events are
        new."""
        if not self.workflow or workflow != self.workflow or event.at is None:
            return False
        return event.seq <= self.seq and event.at <= self.at


class RemoteError(Exception):
    """The scheduler's API did not answer usefully (one line)."""


class Unauthorized(RemoteError):
    """The scheduler refused this client's API token, or needs one (401)."""


class StreamUnsupported(RemoteError):
    """The server has no event stream (an older scheduler): poll instead."""


@dataclass(frozen=True)
class LinkStatus:
    """How current an attached console's data is.

    ``state``: ``connecting`` (nothing received yet), ``live`` (connected, heard from within
    ``stale_after_s``), ``reconnecting`` (link lost, data still recent), ``stale`` (nothing
    heard for longer than ``stale_after_s``, connected or not). ``age_s``: seconds since the
    scheduler was last heard from (``None`` before the first frame); ``via``: ``stream`` or
    ``poll``; ``error``: the last failure, one line; ``refused``: that failure was the
    scheduler refusing the API token (401), it answers. ``stopped``: the scheduler has shut
    down (it said so, or its process is gone) at ``stopped_at`` (UTC), ``error`` saying
    why; ``gone``: it did not say so (its process ended, its host no longer announces it),
    so its agents may still run; a stale link is a scheduler that may still exist but does
    not answer. ``hint``:
    once stopped, what comes next, one line (the console watches for it to start again, or
    how to attach again); ``moved``: the console just moved to its scheduler started again
    elsewhere, one line (:mod:`symphony_tui.api.follow`)."""

    state: LinkState
    age_s: float | None
    via: str
    error: str | None = None
    stopped_at: datetime | None = None
    refused: bool = False
    hint: str | None = None
    moved: str | None = None
    gone: bool = False


def backoff_s(attempt: int, *, rng: Callable[[float, float], float] = random.uniform) -> float:
    """Full-jitter exponential backoff: uniform in ``[0, min(cap, base * 2**attempt)]``."""
    return rng(0.0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))


class RemotePort(SchedulerPort):
    # The scheduler runs elsewhere: quitting detaches, unless q's "Stop N agents" sends it
    # the stop command.
    detach_only = True
    carries_stop = True

    def __init__(
        self,
        base_url: str,
        *,
        client: httpx.AsyncClient | None = None,
        token: str | None = None,
        control: str | None = None,
        mode: Literal["stream", "poll"] = "stream",
        stale_after_s: float = STALE_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
        owner: Owner | None = None,
        via: str | None = None,
        token_hint: str | None = None,
        on_events: Callable[[list[AgentEvent]], None] | None = None,
        ring: int = RING,
        taken: Taken | None = None,
    ) -> None:
        """``owner``: the scheduler's process on this machine (``announce.Owner``), asked
        while the link is lost whether it still serves (no: it stopped). ``via``: what
        this client is, for the scheduler's audit log (``fleet``: sent as
        ``X-Symphony-Via``). ``token_hint``: what gives this client the scheduler's
        token, said when it needs one and none was sent (None: ``$SYMPHONY_API_TOKEN``,
        or ``--token-env VAR``). ``on_events``: called with each batch of events this port
        takes in, in ``seq`` order, each once (a front end merging several ports).
        ``ring``: how many recent events ``events_since`` keeps (0: none, for a front end
        that keeps its own from ``on_events``; transcripts are kept either way).
        ``taken``: the newest event taken from an earlier process of this scheduler (module
        doc); its history up to there is not taken again."""
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        headers[OPERATOR_HEADER] = local_operator()  # who, in the scheduler's audit log
        if control:
            headers[CONTROL_HEADER] = control  # the controls (docs/security.md)
        if via:
            headers[VIA_HEADER] = via
        self._client = client or httpx.AsyncClient(base_url=self.base_url, timeout=10.0)
        self._client.headers.update(headers)
        self.mode = mode
        self.token_hint = token_hint
        self.stale_after_s = stale_after_s
        self._clock = clock
        self._snapshot = Snapshot(generated_at=datetime.now(UTC))
        self._doc: dict[str, Any] | None = None
        self._ring: deque[AgentEvent] = deque(maxlen=ring)
        self._transcripts: dict[str, deque[AgentEvent]] = {}
        self._gaps: dict[str, TranscriptGap] = {}  # issue id -> the scheduler's, as last read
        self._dropped_here: dict[str, int] = {}  # issue id -> events this client's deque dropped
        self._asked: dict[str, float] = {}
        self._last_seq = 0
        self.last_event_id: str | None = None
        self._heard_at: float | None = None
        self._connected = False
        self._refused = False  # the last failure was a 401 (``LinkStatus.refused``)
        self.gaps = 0  # times the server said events were lost between two connections
        self.error: str | None = None
        self._stop = asyncio.Event()
        self._running: asyncio.Task | None = None
        self._owner = owner
        self.stopped_at: datetime | None = None  # set once the scheduler has stopped
        #: The snapshot as it was when the scheduler stopped, live rows included (what it
        #: last said it ran); None while it runs.
        self.before_stop: Snapshot | None = None
        #: The scheduler itself said it was stopping (its stream's ``stopping`` frame, a
        #: poll's 503 ``scheduler_stopping``): its runs were ended. False while it runs, and
        #: when it was found gone without a word (its process no longer serves, its host no
        #: longer announces it): its agents may still run, detached ones to be re-adopted.
        self.said_stopping = False
        self.on_events = on_events
        #: What an earlier process of this scheduler was followed up to (not taken again).
        self.taken_before = taken
        self._taken: Taken | None = None

    # -- SchedulerPort --------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def stopped(self) -> bool:
        """True once the scheduler has shut down (see :meth:`link`)."""
        return self.stopped_at is not None

    @property
    def gone(self) -> bool:
        """It shut down without saying so (:attr:`said_stopping` false): its process
        ended, or its host no longer announces it; its agents may still run."""
        return self.stopped_at is not None and not self.said_stopping

    def last_said(self) -> Snapshot:
        """The snapshot as the scheduler last sent it: of one :attr:`gone`, as it was
        before (``before_stop``, its runs kept); else :meth:`snapshot`."""
        if self.gone and self.before_stop is not None:
            return self.before_stop
        return self.snapshot()

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        if issue_id is not None:
            self._asked[issue_id] = self._clock()
            source = self._transcripts.setdefault(issue_id, deque(maxlen=TRANSCRIPT))
        else:
            source = self._ring
        return [e for e in source if e.seq > seq][-limit:]

    def transcript_gap(self, issue_id: str) -> TranscriptGap:
        """The scheduler's gap as its ``/api/v1/events`` headers last said (the event file
        is a path on the scheduler's host), plus the events this client's own bounded copy
        dropped (counted in ``events`` only: their bytes are not summed)."""
        gap = self._gaps.get(issue_id) or TranscriptGap()
        here = self._dropped_here.get(issue_id, 0)
        return TranscriptGap(gap.events + here, gap.bytes, gap.event_file) if here else gap

    async def send(
        self, command: Command, *, who: str | None = None, via: str = "console"
    ) -> CommandResult:
        # who: this console's user (the X-Symphony-Operator header); via: the server's view
        if self.stopped:
            return CommandResult(False, "the scheduler has stopped")
        try:
            response = await self._client.post(
                "/api/v1/commands",
                content=command.model_dump_json(),
                headers={"Content-Type": "application/json"},
            )
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            return CommandResult(False, f"scheduler unreachable: {link_reason(exc)}")
        if response.status_code != 200:
            message = (body.get("error") or {}).get("message", response.text[:200])
            return CommandResult(False, message)
        return CommandResult(bool(body.get("ok")), str(body.get("message", "")))

    # -- workspace diffs and the audit log (asked for on demand, never cached) ----------------
    async def _get_json(self, url: str, **params: str | int) -> tuple[int, bytes]:
        try:
            response = await self._client.get(url, params=params)
        except httpx.HTTPError as exc:
            raise RemoteError(f"scheduler unreachable: {link_reason(exc)}") from exc
        return response.status_code, response.content

    async def diff(self, issue: str) -> WorkspaceDiff:
        try:
            status, body = await self._get_json(f"/api/v1/diff/{quote(issue, safe='')}")
        except RemoteError as exc:
            return WorkspaceDiff(issue_identifier=issue, error=str(exc))
        if status != 200:
            return WorkspaceDiff(issue_identifier=issue, error=_body_message(status, body))
        return WorkspaceDiff.model_validate_json(body)

    async def diff_file(
        self, issue: str, path: str, *, offset: int = 0, limit: int = 400
    ) -> DiffPage:
        url = f"/api/v1/diff/{quote(issue, safe='')}/file"
        try:
            status, body = await self._get_json(url, path=path, offset=offset, limit=limit)
        except RemoteError as exc:
            return DiffPage(path=path, error=str(exc))
        if status != 200:
            return DiffPage(path=path, error=_body_message(status, body))
        return DiffPage.model_validate_json(body)

    async def audit_entries(self, limit: int = 500) -> list[AuditEntry]:
        """Raises :class:`RemoteError` when the scheduler does not answer with its log."""
        status, body = await self._get_json("/api/v1/audit", limit=min(limit, 1000))
        if status != 200:
            raise RemoteError(_body_message(status, body))
        return _AUDIT.validate_python(json.loads(body)["entries"])

    async def note_action(self, what: str, **fields: object) -> AuditEntry | None:
        """Audit a console action on the scheduler's side (its log is the one log); ``None``
        when it could not be (the scheduler is unreachable or keeps no log)."""
        fields.pop("who", None)
        fields.pop("via", None)
        try:
            response = await self._client.post(
                "/api/v1/audit",
                content=json.dumps({"what": what, **fields}),
                headers={"Content-Type": "application/json"},
            )
        except httpx.HTTPError:
            return None
        if response.status_code != 201:
            return None
        return AuditEntry.model_validate_json(response.content)

    async def wait_stopped(self, poll_s: float = 0.1) -> bool:
        """Wait until the scheduler has stopped (:attr:`stopped`) and, on this machine, its
        process has ended. True when its end is known (the process gone); False when only
        its stream said it stops (another machine: its agents may still be ending)."""
        while not self.stopped:
            if self._owner is not None and not self._owner.serving():
                self._ended("its process no longer serves")
                break
            await asyncio.sleep(poll_s)
        if self._owner is None:
            return False
        while not self._owner.ended():
            await asyncio.sleep(poll_s)
        return True

    # -- freshness ------------------------------------------------------------------------
    def link(self) -> LinkStatus:
        """The link's state now (see :class:`LinkStatus`)."""
        age = None if self._heard_at is None else max(0.0, self._clock() - self._heard_at)
        if self.stopped_at is not None:
            return LinkStatus(
                "stopped", age, self.mode, self.error, self.stopped_at, gone=self.gone
            )
        if age is None:
            state: LinkState = "connecting"
        elif age > self.stale_after_s:
            state = "stale"
        else:
            state = "live" if self._connected else "reconnecting"
        return LinkStatus(state, age, self.mode, self.error, refused=self._refused)

    def taken(self) -> Taken | None:
        """The newest event this port took, or else what it was told an earlier process
        of its scheduler was followed up to (None: nothing)."""
        return self._taken or self.taken_before

    def transcripts(self) -> dict[str, list[AgentEvent]]:
        """Each issue's transcript as this port holds it (issue id -> its events, in
        ``seq`` order), for the issues asked about that have any."""
        return {issue_id: list(events) for issue_id, events in self._transcripts.items() if events}

    def seen_seq(self) -> int:
        """The highest event ``seq`` this port has handed out, from its ring or an issue's
        transcript (0: none)."""
        tails = [t[-1].seq for t in self._transcripts.values() if t]
        return max([self._last_seq, *tails])

    def watch_owner(self, owner: Owner) -> None:
        """Ask ``owner`` from now on whether the scheduler still serves while the link is
        lost (its process found after this port was made: its API answered before its note
        was written); now too, when the link is lost already."""
        self._owner = owner
        if not self._connected and not owner.serving():
            self._ended("its process no longer serves")

    def note_stopped(self, reason: str) -> None:
        """The scheduler is known to have stopped from elsewhere (its host's discovery no
        longer finds it): as :meth:`link` says when it said so itself."""
        self._ended(reason)

    def _heard(self) -> None:
        self._heard_at = self._clock()
        self._connected = True
        self._refused = False

    def _lost(self, exc: Exception | str) -> None:
        # The link's own trouble (``link().error``): the snapshot keeps what the scheduler
        # last said, its tracker error included; the console names the link, not the tracker.
        self._connected = False
        self.error = link_reason(exc)
        self._refused = isinstance(exc, Unauthorized)
        if self._owner is not None and not self._owner.serving():
            self._ended("its process no longer serves")

    def _ended(self, reason: str, at: datetime | None = None, *, said: bool = False) -> None:
        """The scheduler has shut down (``reason``, one line, becomes ``link().error``): no
        live rows, no approvals, no claims, no reconnecting. Its issues read unclaimed
        (idle), not released: nothing holds them, and the next start dispatches them.
        ``said``: it said so itself (:attr:`said_stopping`)."""
        if self.stopped_at is not None:
            return
        self.stopped_at = at or datetime.now(UTC)
        self.said_stopping = said
        self._connected = False
        self.error = reason
        snap = self.before_stop = self._snapshot
        issues = tuple(
            row
            if row.claim in (ClaimState.UNCLAIMED, ClaimState.RELEASED)
            else row.model_copy(update={"claim": ClaimState.UNCLAIMED})
            for row in snap.issues
        )
        self._snapshot = snap.model_copy(
            update={
                "issues": issues,
                "running": (),
                "retrying": (),
                "approvals": (),
                "next_poll_at": None,
            }
        )
        self._stop.set()

    # -- polling (fallback) -----------------------------------------------------------------
    async def refresh_once(self) -> None:
        """Fetch the snapshot and new events once. Raises :class:`RemoteError`."""
        try:
            snap = await self._client.get("/api/v1/snapshot")
            if self._stopping_answer(snap):
                return
            self._raise_unless_ok(snap)
            fresh = Snapshot.model_validate_json(snap.content)
            if fresh.started_at != self._snapshot.started_at:
                self._forget_events()  # another scheduler process: numbered by its own history
            self._snapshot = fresh
            events = await self._client.get(
                "/api/v1/events", params={"since": self._last_seq, "limit": 2000}
            )
            if self._stopping_answer(events):
                return
            self._raise_unless_ok(events)
            self._take_events(_EVENTS.validate_json(events.content))
            await self._fetch_transcripts()
        except (httpx.HTTPError, ValueError) as exc:
            raise RemoteError(f"{self.base_url}: {link_reason(exc)}") from exc
        self._heard()

    async def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                await self.refresh_once()
            except RemoteError as exc:
                self._lost(exc)
            else:
                if self.stopped_at is None:
                    self.error = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=POLL_S)

    # -- the stream ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Follow the scheduler until :meth:`close`: the stream, reconnecting with jittered
        backoff, or polling when the server has no stream. Failures show in :meth:`link`
        and as the snapshot's ``tracker_error``."""
        self._running = asyncio.current_task()
        if self.mode == "poll":
            await self._poll()
            return
        transcripts = asyncio.create_task(self._transcript_loop())
        try:
            attempt = 0
            while not self._stop.is_set():
                heard_before = self._heard_at
                try:
                    await self.stream_once()
                except StreamUnsupported:
                    self.mode = "poll"
                    transcripts.cancel()
                    await self._poll()
                    return
                except (RemoteError, httpx.HTTPError, ValueError) as exc:
                    self._lost(exc)
                else:
                    self._connected = False
                if self._heard_at != heard_before:
                    attempt = 0  # this connection worked: start the backoff over
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), timeout=backoff_s(attempt))
                attempt += 1
        finally:
            transcripts.cancel()

    async def stream_once(self) -> None:
        """One connection to ``/api/v1/stream``, resuming after :attr:`last_event_id`, until
        the server ends it, :meth:`close`, or silence longer than ``stale_after_s`` (raises
        ``httpx.ReadTimeout``). Raises :class:`StreamUnsupported` on 404/405 and
        :class:`RemoteError` on another refusal (401: a missing or wrong token)."""
        headers = {"Accept": "text/event-stream"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        timeout = httpx.Timeout(10.0, read=self.stale_after_s)
        async with aconnect_sse(
            self._client, "GET", "/api/v1/stream", headers=headers, timeout=timeout
        ) as source:
            response = source.response
            if response.status_code in (404, 405):
                raise StreamUnsupported(f"{self.base_url}: no event stream")
            if response.status_code == 401:
                await response.aread()
                raise Unauthorized(f"{self.base_url}: {self._unauthorized()}")
            if response.status_code != 200:
                await response.aread()
                raise RemoteError(f"{self.base_url}: {response.status_code} {_message(response)}")
            snapshot_seen = False
            async for sse in source.aiter_sse():
                if sse.event == "snapshot":
                    self._apply_snapshot(json.loads(sse.data))
                    snapshot_seen = True
                elif sse.event == "change":
                    self._apply_change(json.loads(sse.data))
                elif sse.event == "stopping":
                    self._stopping_frame(sse.data)
                    return
                if sse.id:
                    self.last_event_id = sse.id
                if not snapshot_seen:
                    continue  # the ``retry:`` advice alone: not live before this link's state
                self._heard()
                self.error = None
                if self._stop.is_set():
                    break
                # frames read together would otherwise be applied in one go, and a key
                # pressed meanwhile waits for the whole burst: one frame per loop turn
                await asyncio.sleep(0)

    def _unauthorized(self) -> str:
        """A 401 in one line: the token sent was refused, or one is needed."""
        if "Authorization" in self._client.headers:
            return "401: the scheduler refused the API token sent (a wrong or old token)"
        hint = self.token_hint or "$SYMPHONY_API_TOKEN, or --token-env VAR"
        return f"401: the scheduler needs its API token ({hint})"

    def _raise_unless_ok(self, response: httpx.Response) -> None:
        """Raise when a poll was not answered 200: :class:`Unauthorized` for a 401 (which
        case, :meth:`_unauthorized`), else :class:`RemoteError` with the status and the
        server's reason, one line."""
        if response.status_code == 200:
            return
        if response.status_code == 401:
            raise Unauthorized(f"{self.base_url}: {self._unauthorized()}")
        raise RemoteError(
            f"{self.base_url}: HTTP {_body_message(response.status_code, response.content)}"
        )

    def _stopping_answer(self, response: httpx.Response) -> bool:
        """A poll answered 503 ``scheduler_stopping`` (the polling twin of the stream's
        ``stopping`` frame): the scheduler is shutting down. True when it was."""
        if response.status_code != 503:
            return False
        try:
            error = response.json()["error"]
            if error["code"] != "scheduler_stopping":
                return False
            at = datetime.fromisoformat(error["at"])
            reason = str(error.get("message") or "")
        except (ValueError, KeyError, TypeError):
            return False
        self._heard()
        self._ended(reason or "it said it was stopping", at, said=True)
        return True

    def _stopping_frame(self, data: str) -> None:
        """The stream's last frame: the scheduler is shutting down (``{"at", "reason"}``)."""
        try:
            frame = json.loads(data)
            at = datetime.fromisoformat(frame["at"])
            reason = str(frame.get("reason") or "")
        except (ValueError, KeyError, TypeError):
            at, reason = None, ""
        self._ended(reason or "it said it was stopping", at, said=True)

    def _apply_snapshot(self, frame: dict[str, Any]) -> None:
        if frame.get("reset"):
            self._forget_events()
        if frame.get("gap"):
            self.gaps += 1
        self._doc = frame["snapshot"]
        self._snapshot = Snapshot.model_validate(self._doc)

    def _apply_change(self, frame: dict[str, Any]) -> None:
        patch = frame.get("patch")
        if patch:
            if self._doc is None:
                raise RemoteError(f"{self.base_url}: a change arrived before the snapshot")
            doc, self._doc = self._doc, None  # changed in place: unusable if this fails
            try:
                self._doc, self._snapshot = apply_change(doc, self._snapshot, patch)
            except PatchError as exc:  # the reconnect's first frame is a whole snapshot
                raise RemoteError(f"{self.base_url}: patch does not apply: {exc}") from exc
        self._take_events(AgentEvent.model_validate(e) for e in frame.get("events") or ())

    # -- events and transcripts ---------------------------------------------------------------
    def _take_events(self, events: Iterable[AgentEvent]) -> None:
        taken: list[AgentEvent] = []
        before = self.taken_before
        workflow = self._snapshot.workflow_path
        for event in events:
            if event.seq <= self._last_seq:
                continue  # already held (never shown twice)
            self._last_seq = event.seq
            if before is not None and before.holds(workflow, event):
                continue  # an earlier process's, taken from it
            self._ring.append(event)
            taken.append(event)
        if taken:
            times = [e.at for e in taken if e.at is not None]
            before_at = self._taken.at if self._taken and self._taken.workflow == workflow else None
            if before_at is not None:
                times.append(before_at)
            if workflow and times:
                self._taken = Taken(workflow, max(times), taken[-1].seq)
            if self.on_events is not None:
                self.on_events(taken)

    def _forget_events(self) -> None:
        # another process of the scheduler: its history repeats what this port took
        self.taken_before = self.taken()
        self._ring.clear()
        self._transcripts = {k: deque(maxlen=TRANSCRIPT) for k in self._transcripts}
        self._dropped_here.clear()
        self._last_seq = 0

    async def _fetch_transcripts(self) -> None:
        now = self._clock()
        for issue_id, asked in list(self._asked.items()):
            if now - asked > ASKED_KEEP_S:
                del self._asked[issue_id]
                continue
            transcript = self._transcripts.setdefault(issue_id, deque(maxlen=TRANSCRIPT))
            since = transcript[-1].seq if transcript else 0
            got = await self._client.get(
                "/api/v1/events", params={"since": since, "issue_id": issue_id}
            )
            got.raise_for_status()
            fetched = _EVENTS.validate_json(got.content)
            overflow = len(transcript) + len(fetched) - (transcript.maxlen or 0)
            if transcript.maxlen is not None and overflow > 0:
                self._dropped_here[issue_id] = self._dropped_here.get(issue_id, 0) + overflow
            transcript.extend(fetched)
            self._gaps[issue_id] = _gap_of(got.headers)

    async def _transcript_loop(self) -> None:
        """Transcripts are detail for the issue the operator is looking at: fetched, for the
        issues asked about in the last :data:`ASKED_KEEP_S`, once a second."""
        while not self._stop.is_set():
            with contextlib.suppress(httpx.HTTPError, ValueError):
                await self._fetch_transcripts()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=TRANSCRIPT_S)

    async def close(self) -> None:
        """Stop :meth:`run` (its open request is cancelled, not left to time out) and close
        the HTTP client."""
        self._stop.set()
        running, self._running = self._running, None
        if running is not None and running is not asyncio.current_task() and not running.done():
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running
        await self._client.aclose()


def _body_message(status: int, body: bytes) -> str:
    try:
        return f"{status}: {json.loads(body)['error']['message']}"
    except (ValueError, KeyError, TypeError):
        return f"{status}: {body[:200].decode('utf-8', 'replace')}"


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


def _gap_of(headers: httpx.Headers) -> TranscriptGap:
    """The ``X-Transcript-Dropped-*`` / ``X-Event-File`` headers of an ``/api/v1/events``
    answer as a gap; missing or malformed counts read as 0 (an older server)."""

    def count(name: str) -> int:
        value = headers.get(name, "")
        return int(value) if value.isdigit() else 0

    return TranscriptGap(
        count("X-Transcript-Dropped-Events"),
        count("X-Transcript-Dropped-Bytes"),
        headers.get("X-Event-File") or None,
    )
