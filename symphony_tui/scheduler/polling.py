"""The inputs that come from time (spec §8.1, §8.4, §6.2): tick cycles, the poll timer,
WORKFLOW.md re-checks (off the loop, before each cycle and due retry) and reloads, and
due retries.

A tick cycle is a task: it does the tracker I/O and posts each result to the inbox, where
the loop applies it (``TickStarted`` -> ``RunningStates`` -> ``Candidates`` ->
``TickEnded``). Cycles never overlap: a tick asked for during one runs right after it. A
due retry's refresh of its issue by id is a task too, applied as ``RetryFetched``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from symphony_tui.config.store import WorkflowStore
from symphony_tui.config.validate import validate_dispatch
from symphony_tui.domain import EventKind, Issue
from symphony_tui.scheduler import reconcile
from symphony_tui.scheduler.clock import TimerHandle
from symphony_tui.scheduler.dispatch import Dispatcher
from symphony_tui.scheduler.inbox import (
    Candidates,
    Reload,
    RetryFetched,
    RunningStates,
    Tick,
    TickEnded,
    TickStarted,
    reply,
)
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.state import RetryState, SchedulerState
from symphony_tui.trackers.base import Tracker, TrackerError

log = logging.getLogger("symphony_tui.scheduler")


class Polling:
    """Tick cycles and due retries of one scheduler; the cycles and retry fetches are
    tasks of ``mailbox`` and post their results to it (the poll timer posts ``Tick``)."""

    def __init__(
        self,
        state: SchedulerState,
        store: WorkflowStore,
        tracker: Tracker,
        dispatcher: Dispatcher,
        mailbox: Mailbox,
    ) -> None:
        self.state = state
        self._store = store
        self._tracker = tracker
        self._dispatcher = dispatcher
        self._mailbox = mailbox
        #: The tick cycle in flight, if any.
        self.task: asyncio.Task | None = None
        self._tick_replies: list[asyncio.Future] = []
        self._tick_again = False
        self._tick_timer: TimerHandle | None = None

    @property
    def needs_tick_for_idle(self) -> bool:
        """Nothing running or retrying, no tick under way, and none finished since the last
        change: idleness (``--exit-when-idle``) cannot be decided until another tick runs."""
        state = self.state
        return (
            not state.running
            and not state.retrying
            and state.last_tick_done_mono <= state.last_change_mono
            and self.task is None
        )

    def cancel_timer(self) -> None:
        if self._tick_timer is not None:
            self._tick_timer.cancel()
            self._tick_timer = None

    # ------------------------------------------------------------------ ticks

    def on_tick(self, answer: asyncio.Future | None) -> None:
        if self.state.stopping:
            reply(answer, None)
            return
        if self._tick_timer is not None:
            self._tick_timer.cancel()
            self._tick_timer = None
        if self.task is not None:
            self._tick_again = True
            reply(answer, None)
            return
        if answer is not None:
            self._tick_replies.append(answer)
        self.task = self._mailbox.spawn(self._cycle(), name="tick")

    async def _cycle(self) -> None:
        """One poll-and-dispatch cycle: I/O here, every decision in the loop."""
        try:
            started = self.state.clock.monotonic()
            await self.reload_workflow()
            ids = await self._mailbox.ask(TickStarted())
            if await self.apply_running_states(ids or []):
                try:
                    issues, error = await self._tracker.fetch_candidate_issues(), None
                except TrackerError as exc:
                    issues, error = None, exc
                await self._mailbox.ask(Candidates(issues, error, started))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tick must never kill the scheduler
            log.exception("tick failed")
            self.state.emit_system(EventKind.ERROR, f"tick failed: {exc}")
        finally:
            self._mailbox.post(TickEnded())

    def on_started(self) -> list[str]:
        """``TickStarted``: stop stalled runs; the ids of running issues to refresh."""
        self.state.tick_started()
        return reconcile.stop_stalled(self.state)

    def on_running_states(
        self, ids: list[str], issues: list[Issue] | None, error: TrackerError | None
    ) -> bool:
        """``RunningStates``: apply the refresh; whether the tick fetches candidates."""
        if ids:
            reconcile.states_fetched(self.state, ids, issues, error)
        return self.may_fetch_candidates()

    def on_candidates(
        self, issues: list[Issue] | None, error: TrackerError | None, started_mono: float
    ) -> None:
        """``Candidates``: dispatch from a poll's candidates (or note the fetch failed)."""
        if error is not None:
            self.state.tracker_failed(error, "candidate fetch failed")
            self.state.tick_found(1)
        else:
            self._dispatcher.candidates_fetched(issues or [], started_mono)

    async def apply_running_states(self, ids: list[str]) -> bool:
        """Refresh running issues ``ids`` from the tracker and apply the result; returns
        whether this tick goes on to fetch candidates."""
        issues, error = None, None
        if ids:
            try:
                issues = await self._tracker.fetch_issues_by_ids(ids)
            except TrackerError as exc:
                error = exc
        return bool(await self._mailbox.ask(RunningStates(ids, issues, error)))

    def may_fetch_candidates(self) -> bool:
        """Re-check the workflow and validate it for dispatch (§6.2, §6.3); False when
        dispatch is blocked (or the tracker rate limited), so the tick stops here."""
        state = self.state
        errors = validate_dispatch(state.settings)
        # Both matter to the operator: why dispatch is blocked now, and why the newest
        # edit of WORKFLOW.md was not taken.
        state.set_config_error("; ".join(e for e in (*errors, self._store.error) if e) or None)
        if errors:
            state.log("error", "dispatch validation failed", error=state.config_error)
            state.tick_found(1)  # not idle: an operator must fix the workflow
            return False
        if state.tracker_paused():
            state.tick_found(1)
            return False
        return True

    def on_tick_ended(self) -> None:
        self.task = None
        self.state.tick_done()
        self.schedule_next_tick()
        answers, self._tick_replies = self._tick_replies, []
        for answer in answers:
            reply(answer, None)
        if self._tick_again and not self.state.stopping:
            self._tick_again = False
            self.on_tick(None)

    def schedule_next_tick(self) -> None:
        if self.state.stopping:
            return
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        delay = self.state.poll_delay_s()
        self.state.set_next_poll(self.state.clock.now() + timedelta(seconds=delay))
        mailbox = self._mailbox
        self._tick_timer = self.state.clock.call_later(delay, lambda: mailbox.post(Tick()))

    # ------------------------------------------------------------------ retries

    def on_retry_due(self, issue_id: str, token: int) -> asyncio.Task | None:
        """A retry timer fired (§8.4, §16.6): a stale token means the entry was replaced.
        The current entry is taken off the queue and its issue's refresh started."""
        state = self.state
        retry = state.retrying.get(issue_id)
        if retry is None or retry.token != token or state.stopping:
            return None
        state.pop_retry(issue_id)
        return self._mailbox.spawn(self._retry_fetch(retry), name="retry")

    async def _retry_fetch(self, retry: RetryState) -> None:
        """Refresh the retried issue alone by id (§8.4): a terminal, inactive or unroutable
        issue is seen as such, not merely absent from the candidates."""
        await self.reload_workflow()  # a retry is a dispatch too (spec §6.2: re-check before it)
        try:
            issues, error = await self._tracker.fetch_issues_by_ids([retry.entry.issue_id]), None
        except TrackerError as exc:
            issues, error = None, exc
        terminal = [i for i in issues or () if self.state.settings.tracker.is_terminal(i.state)]
        for issue in terminal:
            # Unclaimed while its retry is refreshed, and a terminal issue is never a
            # candidate: nothing else uses the workspace (§8.4 step 3).
            await self._remove_terminal_workspace(issue)
        await self._mailbox.ask(RetryFetched(retry, issues, error))

    async def _remove_terminal_workspace(self, issue: Issue) -> None:
        workspaces = self.state.workspaces
        try:
            if workspaces.path_for(issue.identifier).exists():
                await workspaces.remove(issue.identifier)
        except Exception as exc:  # one line here; the claim is released either way
            log.warning(
                "terminal workspace removal failed issue_identifier=%s error=%s",
                issue.identifier,
                exc,
            )

    # ------------------------------------------------------------------ workflow

    async def reload_workflow(self) -> None:
        """Re-read WORKFLOW.md before dispatching, in case a watch event was missed
        (spec §6.2): evaluated off the loop (``WorkflowStore.reload``), and a new good
        version or a new error is posted (``Reload``) ahead of what the caller posts next,
        like a watched change."""
        before = self._store.error
        if await self._store.reload() or self._store.error != before:
            self._mailbox.post(Reload())

    def on_workflow_reloaded(self) -> None:
        state = self.state
        error = self._store.error
        blocking = validate_dispatch(self.state.settings)
        state.set_config_error("; ".join(e for e in (*blocking, error) if e) or None)
        if error:
            state.emit_system(
                EventKind.CONFIG, f"WORKFLOW.md reload failed, keeping last good: {error}"
            )
        else:
            state.emit_system(EventKind.CONFIG, "WORKFLOW.md reloaded")
            self.schedule_next_tick()
