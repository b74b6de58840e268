"""What agent sessions report about their run: normalized events and session facts (the payload
types of ``domain/payloads.py``; tokens per spec §13.5 and docs/protocols.md "Token usage").

Each event updates its :class:`Run`'s live fields (session and turn ids, last event and
message, tokens), the shared :class:`TokenLedger` and the latest rate limits, then goes into
the event log stamped with its issue. Session facts (thread id, resume data) go to the
workspace's session manifest, so a later attempt can re-attach and count tokens right.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from symphony_tui.config.pricing import ModelPrice
from symphony_tui.domain import AgentEvent, EventKind, RateLimits, RunStatus, TokenUsage
from symphony_tui.domain.kinds import QUIET_KINDS
from symphony_tui.domain.payloads import (
    AgentTrouble,
    RateLimitReport,
    SessionStarted,
    TokenReport,
    TurnStarted,
)
from symphony_tui.observability.logs import log_kv
from symphony_tui.observability.redact import redact
from symphony_tui.scheduler import manifests
from symphony_tui.scheduler.clock import Clock
from symphony_tui.scheduler.history.eventlog import EventHistory
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.usage.tokens import TokenLedger
from symphony_tui.workspaces.manifest_writer import ManifestWriter

log = logging.getLogger("symphony_tui.scheduler")

#: How much of the newest agent text a run keeps as its ``last_message`` (characters).
LAST_MESSAGE_CHARS = 400

#: Events whose message becomes the run's ``last_message``.
_MESSAGE_KINDS = (
    EventKind.MESSAGE,
    EventKind.REASONING,
    EventKind.COMMAND_STARTED,
    EventKind.COMMAND_COMPLETED,
    EventKind.FILE_CHANGE,
    EventKind.ERROR,
    EventKind.TURN_FAILED,
    EventKind.WARNING,
    EventKind.TOOL_CALL,
)


def session_key(run: Run) -> str:
    """The ledger key of a run's session: ``issue_id:backend:thread_id``, or the issue id
    and start time while the session has no thread yet. The issue is part of the key, so a
    thread id that another issue reports too (a reused or copied thread) keeps its own
    baseline per issue: one issue's totals never become the other's starting point."""
    return thread_key(run.issue.id, run.backend, run.thread_id or f"start:{run.started_mono}")


def thread_key(issue_id: str, backend: str, session: str) -> str:
    """The ledger key of ``issue_id``'s session ``session`` (a thread id) on ``backend``."""
    return f"{issue_id}:{backend}:{session}"


class SessionRecorder:
    """Takes in what sessions report, on the event loop (via ``SessionHost.emit`` and
    ``SessionHost.record_session``). ``changed`` tells the owner a snapshot is due.

    ``rate_limits`` is the newest valid ``RATE_LIMITS`` payload any session reported (None
    before the first).
    """

    def __init__(
        self,
        clock: Clock,
        ledger: TokenLedger,
        events: EventHistory,
        *,
        changed: Callable[[], None],
        manifests: ManifestWriter,
    ) -> None:
        self._clock = clock
        self._manifests = manifests
        self._ledger = ledger
        self._events = events
        self._changed = changed
        self.rate_limits: RateLimits | None = None
        #: Called with a run whose token count grew (the state's budget check).
        self.on_tokens: Callable[[Run], None] | None = None
        #: The price of a run's model (None: unknown; config/pricing.py), asked per report.
        self.price_of: Callable[[Run], ModelPrice | None] = lambda run: None

    def on_event(self, run: Run, event: AgentEvent) -> None:
        """Apply ``event`` to ``run`` and append it to the event log (stamped with the issue,
        session id and time). ``TOKEN_USAGE`` carries absolute session totals in
        its :class:`TokenReport`; only their growth is counted (the first report of a
        re-attached session, ``attached``, is its baseline)."""
        now_mono = self._clock.monotonic()
        run.last_output_mono = now_mono
        payload = event.payload
        kind = event.kind
        if kind is EventKind.MESSAGE_DELTA or kind is EventKind.COMMAND_OUTPUT:
            # The hot path under a flood: no wall-clock read, no stamp dict, no
            # copy; the text joins the transcript's live item (eventlog.append_fragment).
            run.last_event_mono = now_mono
            if run.status is RunStatus.RETRYING_MODEL:
                run.status = RunStatus.STREAMING_TURN
            run.last_event = kind.value
            run.last_event_at_mono = now_mono  # turned into a wall time when read
            if kind is EventKind.MESSAGE_DELTA:
                # Kept raw: masked once per snapshot (snapshots.py), not once per delta.
                run.delta_buffer = (run.delta_buffer + event.message)[-LAST_MESSAGE_CHARS:]
                run.last_message = run.delta_buffer
            self._events.append_fragment(
                run.issue.id,
                event,
                issue_identifier=run.issue.identifier,
                session_id=event.session_id or run.session_id,
                at=event.at,
            )
            self._changed()
            return
        now = self._clock.now()
        if isinstance(payload, SessionStarted):
            if payload.thread_id:
                self._set_thread(run, payload.thread_id)
            if payload.session_id:
                run.session_id = payload.session_id
            if payload.model:
                run.model = payload.model
        elif isinstance(payload, TurnStarted) and payload.turn_id:
            run.turn_cost_base = run.tokens.cost_usd or 0.0
            turn = payload.turn_id
            run.turn_id = turn
            run.session_id = f"{run.thread_id}-{turn}" if run.thread_id else turn
        stamp = {
            "issue_id": run.issue.id,
            "issue_identifier": run.issue.identifier,
            "session_id": event.session_id or run.session_id,
            "at": event.at or now,
        }
        if isinstance(payload, AgentTrouble) and payload.will_retry:
            # The backend cannot reach its model and retries by itself (codex: "Reconnecting...",
            # for ever while the port refuses). Shown as such; not progress, so the stall
            # timeout ends the attempt instead of codex.turn_timeout_ms (an hour by default).
            if run.status is RunStatus.STREAMING_TURN:
                run.status = RunStatus.RETRYING_MODEL
        else:
            run.last_event_mono = now_mono
            if run.status is RunStatus.RETRYING_MODEL:
                run.status = RunStatus.STREAMING_TURN
        if kind not in QUIET_KINDS:
            run.last_event_at = now
            run.last_event_at_mono = None
            run.last_event = kind.value
        if kind in _MESSAGE_KINDS:
            if kind in (EventKind.MESSAGE, EventKind.REASONING):
                # a finished item: the next deltas (reasoning or answer) start afresh
                run.delta_buffer = ""
            if event.message:
                run.last_message = redact(event.message[-LAST_MESSAGE_CHARS:])
        elif isinstance(payload, TokenReport):
            self._count_tokens(run, payload, now_mono)
        elif isinstance(payload, RateLimitReport):
            self.rate_limits = payload.rate_limits
        event = self._events.append(event, **stamp)
        self._changed()
        if kind not in QUIET_KINDS:
            log_kv(
                log,
                "info",
                kind.value,
                issue_id=run.issue.id,
                issue_identifier=run.issue.identifier,
                session_id=event.session_id,
                message=event.message[:500],
            )

    def record_session(self, run: Run, fields: Mapping[str, Any]) -> None:
        """Session facts from the backend (``thread_id``, ``session_id`` and whatever it needs
        to resume): applied to ``run`` and merged into the workspace's session manifest. A
        failed write is logged; the run goes on."""
        thread = fields.get("thread_id")
        if thread:
            self._set_thread(run, str(thread))
        if fields.get("session_id"):
            run.session_id = str(fields["session_id"])
        manifests.session_facts(self._manifests, run, fields)
        self._changed()

    def persist_tokens(self, run: Run) -> None:
        """Write the thread's absolute token totals (``thread_tokens``) to the session
        manifest, so a re-attached thread counts only new usage. No-op without a thread."""
        if run.workspace is None or run.thread_id is None:
            return
        baseline = self._ledger.baseline(session_key(run))
        if baseline is None:
            return
        manifests.thread_tokens(self._manifests, run, baseline)

    def _count_tokens(self, run: Run, report: TokenReport, now_mono: float) -> None:
        absolute = report.usage
        key = session_key(run)
        baseline = self._ledger.baseline(key)
        if report.attached and (baseline is None or absolute.total_tokens < baseline.total_tokens):
            # Totals of a re-attached session, reported before any new work: the starting
            # point, not new usage (it was counted by whoever ran it). Below what was
            # counted (the thread lost its unfinished turn's usage): counting goes on from
            # there, nothing added. Above it: the growth the crashed process had not yet
            # counted is added below.
            self._ledger.seed(key, absolute)
        else:
            growth = self._ledger.report(
                key, absolute, now_mono, issue_id=run.issue.id, price=self.price_of(run)
            )
            if not absolute.is_zero:
                run.usage_reported = True
            run.tokens = run.tokens + growth
            if self.on_tokens is not None and (growth.total_tokens or growth.cost_usd):
                self.on_tokens(run)

    def _set_thread(self, run: Run, thread_id: str) -> None:
        if run.thread_id == thread_id:
            return
        run.thread_id = thread_id
        key = session_key(run)
        if self._ledger.baseline(key) is None and run.resume.get("thread_id") == thread_id:
            recorded = run.resume.get("thread_tokens")
            if isinstance(recorded, dict):
                with contextlib.suppress(ValueError):
                    self._ledger.seed(key, TokenUsage.model_validate(recorded))
