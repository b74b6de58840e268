"""A :class:`~symphony_tui.scheduler.port.SchedulerPort` that talks to a scheduler's HTTP API,
so the console can attach to ``symphony-tui --headless --port N`` (over SSH, say).

``snapshot()`` and ``events_since()`` answer from a cache that :meth:`RemotePort.run` keeps
fresh by polling (a few times a second); ``send()`` posts the command. Transcripts are
fetched for the issues the console asks about.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from datetime import UTC, datetime

import httpx
from pydantic import TypeAdapter

from symphony_tui.domain import AgentEvent, Snapshot
from symphony_tui.domain.commands import Command
from symphony_tui.scheduler.port import CommandResult

_EVENTS = TypeAdapter(list[AgentEvent])
POLL_S = 0.25


class RemoteError(Exception):
    """The scheduler's API did not answer usefully (one line)."""


class RemotePort:
    # The scheduler runs elsewhere: a console on this port only detaches when it quits.
    detach_only = True

    def __init__(self, base_url: str, *, client: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.AsyncClient(base_url=self.base_url, timeout=10.0)
        self._snapshot = Snapshot(generated_at=datetime.now(UTC))
        self._ring: deque[AgentEvent] = deque(maxlen=5_000)
        self._transcripts: dict[str, deque[AgentEvent]] = {}
        self._last_seq = 0
        self.error: str | None = None
        self._stop = asyncio.Event()

    # -- SchedulerPort --------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        if issue_id is not None:
            source = self._transcripts.setdefault(issue_id, deque(maxlen=2_000))
        else:
            source = self._ring
        return [e for e in source if e.seq > seq][-limit:]

    async def send(self, command: Command) -> CommandResult:
        try:
            response = await self._client.post(
                "/api/v1/commands",
                content=command.model_dump_json(),
                headers={"Content-Type": "application/json"},
            )
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            return CommandResult(False, f"scheduler unreachable: {exc}")
        if response.status_code != 200:
            message = (body.get("error") or {}).get("message", response.text[:200])
            return CommandResult(False, message)
        return CommandResult(bool(body.get("ok")), str(body.get("message", "")))

    # -- polling ----------------------------------------------------------------------------
    async def refresh_once(self) -> None:
        """Fetch the snapshot and new events once. Raises :class:`RemoteError`."""
        try:
            snap = await self._client.get("/api/v1/snapshot")
            snap.raise_for_status()
            fresh = Snapshot.model_validate_json(snap.content)
            if fresh.started_at != self._snapshot.started_at:
                # Another scheduler process (a restart): its event numbers start again at 1.
                self._ring.clear()
                self._transcripts = {k: deque(maxlen=2_000) for k in self._transcripts}
                self._last_seq = 0
            self._snapshot = fresh
            events = await self._client.get(
                "/api/v1/events", params={"since": self._last_seq, "limit": 2000}
            )
            events.raise_for_status()
            for event in _EVENTS.validate_json(events.content):
                self._ring.append(event)
                self._last_seq = max(self._last_seq, event.seq)
            for issue_id, transcript in list(self._transcripts.items()):
                since = transcript[-1].seq if transcript else 0
                got = await self._client.get(
                    "/api/v1/events", params={"since": since, "issue_id": issue_id}
                )
                got.raise_for_status()
                transcript.extend(_EVENTS.validate_json(got.content))
        except (httpx.HTTPError, ValueError) as exc:
            raise RemoteError(f"{self.base_url}: {exc}") from exc

    async def run(self) -> None:
        """Poll until :meth:`close`; a failing scheduler shows as ``config_error`` text."""
        while not self._stop.is_set():
            try:
                await self.refresh_once()
                self.error = None
            except RemoteError as exc:
                self.error = str(exc)
                self._snapshot = self._snapshot.model_copy(
                    update={"tracker_error": f"scheduler API unreachable: {exc}"}
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=POLL_S)

    async def close(self) -> None:
        self._stop.set()
        await self._client.aclose()
