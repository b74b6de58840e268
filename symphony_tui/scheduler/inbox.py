"""The scheduler's inbox: every input the scheduling loop handles, typed, in two lanes
(docs/architecture.md "Who owns which state"; the reference orchestrator is one process with
one mailbox).

- The **control lane** holds operator commands, their follow-ups and approval traffic. The
  loop always takes from it first, so an operator's interrupt or an approval answer is
  applied before agent traffic that was queued earlier, however much of it there is.
- The **main lane** holds everything else in arrival order: agent events and session facts,
  tick steps and tracker results, retries that came due, workers that ended, reloads. Agent
  traffic is what waits under a flood; its order among itself is kept.

Posting never blocks and never yields (sessions post from their reader callbacks). An input
with a ``reply`` future gets the handler's result there (or its exception).

Back-pressure: a session's reader awaits :meth:`Inbox.room` between batches of
lines; past :data:`HIGH_WATER` queued main-lane inputs it waits until the loop has taken the
lane down to :data:`LOW_WATER`. Agent traffic then waits in the agents' pipes (which slow the
agents down) instead of piling up here, where every queued event is memory, garbage
collector work and latency for whatever the operator reads next. The control lane has no
such bound. Between batches readers also share slices of loop time
(``scheduler/read_slices.py``), so one turn of the loop never holds hundreds of batches.

Congestion (control is never starved by a flood): past :data:`BUSY_MARK` queued main-lane
inputs the inbox is :attr:`Inbox.busy`; a session that can coalesce its streamed deltas
(the codex backend, ``agents/codex/coalesce.py``) then holds them and keeps reading,
instead of posting one input per delta and reaching the high-water mark. So its reader
does not wait for room, and what the agent writes after a flood of deltas (an approval
request, a question) is read promptly. :meth:`Inbox.take_of` takes a session's queued
inputs out of the main lane, for a request of that session that must be applied after them and before everyone else's traffic: the
orchestrator applies them at once, before it files that session's approval request.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symphony_tui.agents.base import AgentSession, FlowControl
from symphony_tui.domain import (
    AgentEvent,
    ApprovalRequest,
    EventKind,
    Issue,
    RecoveredWorkspace,
    RunStatus,
)
from symphony_tui.domain.commands import Command
from symphony_tui.domain.payloads import Payload
from symphony_tui.domain.pull_requests import PullRequestLink
from symphony_tui.hosts.resources import Memory, Usage
from symphony_tui.scheduler.read_slices import ReadSlices
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.trackers.base import TrackerError


def _no_reply() -> asyncio.Future | None:
    return None


def reply(future: asyncio.Future | None, value: Any) -> None:
    """Answer an input's ``reply`` future with ``value`` (nothing when there is none or it
    was answered or cancelled already)."""
    if future is not None and not future.done():
        future.set_result(value)


@dataclass(slots=True)
class AgentTraffic:
    """An event a session reported for ``run`` (``SessionHost.emit``)."""

    run: Run
    event: AgentEvent


@dataclass(slots=True)
class SessionFacts:
    """Session facts a backend recorded for ``run`` (``SessionHost.record_session``)."""

    run: Run
    fields: Mapping[str, Any]


@dataclass(slots=True)
class OperatorCommand:
    """A command from a front end (``SchedulerPort.send``); ``reply`` gets its result."""

    command: Command
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class CommandDone:
    """The I/O part of an operator command finished with ``result`` (``issue`` and
    ``what`` as the command was announced); the loop logs it and answers ``reply``."""

    command: Command
    issue: Issue | None
    what: str
    result: Any  # port.CommandResult
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class IssueMoved:
    """An issue was moved in the tracker by the operator (``run`` None) or by ``run``'s
    agent with the tracker tool."""

    issue: Issue
    run: Run | None = None
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class MoveIntended:
    """``run``'s agent is moving its issue to ``state`` with the tracker tool (after a
    failed move: the intent before it, None for none); replies the intent it replaces."""

    run: Run
    state: str | None
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class WorkspaceRemoved:
    """The operator's workspace removal finished (or failed): recovered workspaces are
    rescanned, and a removal is announced with ``note`` (a failed ``before_remove``)."""

    key: str
    removed: bool
    note: str = ""


@dataclass(slots=True)
class Tick:
    """Poll and reconcile now (a timer, a refresh request or a command). ``reply`` is set
    when the tick cycle this input started has finished (at once when one was running)."""

    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class TickStarted:
    """First step of a tick cycle (§8.1): stall detection; replies with the ids of running
    issues whose tracker state must be refreshed."""

    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class RunningStates:
    """Tracker result: the refreshed states of running issues ``ids`` (§8.5), or the
    ``error`` of that fetch. Replies whether candidates should be fetched now."""

    ids: list[str]
    issues: list[Issue] | None = None
    error: TrackerError | None = None
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class Candidates:
    """Tracker result: the candidate issues of a poll, or the ``error`` of that fetch."""

    issues: list[Issue] | None = None
    error: TrackerError | None = None
    started_mono: float = 0.0
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class TickEnded:
    """Last step of a tick cycle: count it and arm the next poll."""

    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class RetryDue:
    """A retry timer fired for ``issue_id``; ``token`` tells a stale timer from the current
    one (§8.4, §16.6)."""

    issue_id: str
    token: int
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class RetryFetched:
    """Tracker result for a due retry: the candidates, or the ``error`` of that fetch."""

    retry: Any  # state.RetryState
    issues: list[Issue] | None = None
    error: TrackerError | None = None
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class WorkerEnded:
    """``run``'s worker returned ``ending`` (its session is closed, its hooks ran)."""

    run: Run
    ending: Ending


@dataclass(slots=True)
class Recovered:
    """A background workspace rescan finished: the recovered workspaces found (None: it
    failed); ``generation`` tells whether a newer scan made it outdated."""

    workspaces: tuple | None
    generation: int = 0


@dataclass(slots=True)
class Reload:
    """WORKFLOW.md changed on disk (the store's watcher)."""


@dataclass(slots=True)
class Barrier:
    """Replies once everything posted before it in the main lane was handled
    (``Orchestrator.barrier``: shutdown, and tests, wait for what was posted)."""

    reply: asyncio.Future | None = field(default_factory=_no_reply)


# ---------------------------------------------------------------- what a worker reports
#
# A worker (``worker.Worker``) never changes the state itself: it posts these to the main
# lane, behind what its session reported, and the loop applies them in that order. Those
# with a ``reply`` are asked: the worker waits for the loop's answer.


@dataclass(slots=True)
class RunUpdated:
    """``run``'s worker moved it to ``status``; ``error`` (a failed attempt) is said as
    soon as it is known, while the cleanup still runs."""

    run: Run
    status: RunStatus
    error: str | None = None


@dataclass(slots=True)
class WorkspaceReady:
    """``run``'s workspace is ``path`` (``created`` by this attempt); ``resume`` holds the
    session facts a backend re-attaches with. The attempt's start goes to the manifest."""

    run: Run
    path: Path
    resume: dict[str, Any]
    created: bool = False
    started: bool = True  # False: a re-adopted attempt, whose start is already recorded


@dataclass(slots=True)
class SessionOpened:
    """``run``'s agent session is open; ``record_group``: its agent's process group goes
    to the manifest (``manifests.agent_group``)."""

    run: Run
    session: AgentSession
    record_group: bool = False


@dataclass(slots=True)
class SessionClosed:
    """``run``'s agent session closed and its process group was ended (the manifest's
    record of the group is cleared, unless the agent outlives it to be re-adopted)."""

    run: Run


@dataclass(slots=True)
class TurnStarted:
    """``run``'s turn ``turn`` (1-based, of this attempt) is streaming; ``record``: it
    goes to the manifest (not for the turn a re-attached session follows)."""

    run: Run
    turn: int
    record: bool = True


@dataclass(slots=True)
class TurnEnded:
    """``run``'s turn ended; its session's reports came before it. Replies a
    ``state.TurnReview`` (what the state says about going on)."""

    run: Run
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class BudgetCheck:
    """Is ``run`` over a token budget (``SchedulerState.check_budget``)? Replies why it is
    held, or None."""

    run: Run
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class IssueRefreshed:
    """The tracker shows ``run``'s issue as ``issue`` after a turn."""

    run: Run
    issue: Issue


@dataclass(slots=True)
class HookRan:
    """A hook of ``run``'s attempt ran (or was cut short): ``message`` and ``payload`` for
    the history, ``summary`` (``ok``, ``exit 2``...) for the manifest."""

    run: Run
    hook: str
    summary: str
    message: str
    payload: Payload


@dataclass(slots=True)
class RunNoted:
    """Something ``run``'s worker says about it in the history (an operator message
    delivered, messages not delivered)."""

    run: Run
    kind: EventKind
    message: str
    payload: Payload | None = None


@dataclass(slots=True)
class HostFailed:
    """``run`` failed on worker host ``host``: ``lost`` is the lost connection (the host
    goes down, its other runs end), None when only the workspace could not be made or the
    agent not started there (the issue tries another host next)."""

    run: Run
    host: str
    lost: str | None = None


@dataclass(slots=True)
class HostLeftovers:
    """Worker host ``host`` was first reached and still runs ``found``, the live detached
    agents an earlier scheduler left there (scheduler/adoption.py): re-adopt or end them."""

    host: str
    found: tuple[Any, ...]


@dataclass(slots=True)
class TrackerFailed:
    """A worker's tracker call failed with ``error`` (``what``: one line)."""

    error: TrackerError
    what: str


@dataclass(slots=True)
class AttemptEnded:
    """``run``'s attempt ended with ``ending`` and its ``after_run`` ran: the thread's
    token totals and the attempt's end go to the manifest; replies once applied (before
    the workspace of a terminal issue is removed)."""

    run: Run
    ending: Ending
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class RunWorkspaceRemoved:
    """``run``'s worker removed its workspace (the issue went terminal)."""

    run: Run


@dataclass(slots=True)
class ResourcesSampled:
    """A resource sampling pass (``scheduler/resources.py``): ``runs`` maps an issue id to
    its run and that run's agent usage, ``machines`` a worker host (None: this machine) to
    its memory; a machine that could not be sampled is left out."""

    runs: Mapping[str, tuple[Run, Usage]]
    machines: Mapping[str | None, Memory]


# ---------------------------------------------------------------- approvals (control lane)
#
# A session's approval request is asked on the control lane and answered through its
# ``reply``: the desk (``approvals.ApprovalDesk``) files it on the loop, and settles it there
# (the operator's answer, its deadline, the run ending, the session giving up).


@dataclass(slots=True)
class ApprovalAsked:
    """``run``'s session asks ``request`` (``SessionHost.request_approval``); ``reply``
    gets the ``ApprovalAnswer``, once decided. The run's queued inputs are applied first."""

    run: Run
    request: ApprovalRequest
    reply: asyncio.Future | None = field(default_factory=_no_reply)


@dataclass(slots=True)
class ApprovalExpired:
    """The deadline of ``run``'s pending approval ``approval_id`` passed (``timeout_s``
    after it was filed): it is declined."""

    run: Run
    approval_id: str
    timeout_s: float


@dataclass(slots=True)
class ApprovalWithdrawn:
    """``run``'s session stopped waiting for approval ``approval_id`` (its task was
    cancelled): the approval is no longer pending."""

    run: Run
    approval_id: str


@dataclass(slots=True)
class ApprovalsCancelled:
    """``run``'s worker is ending: every approval still pending on it is answered
    ``CANCEL``; replies once they are."""

    run: Run
    reply: asyncio.Future | None = field(default_factory=_no_reply)


# ---------------------------------------------------------------- worker hosts


@dataclass(slots=True)
class HostProbed:
    """A probe of worker host ``name`` finished: its round trip ``rtt_ms``, or the
    ``error`` (one line) that made it fail. ``measured``: the operator's probe of an up host
    (``HostProbes.measure``), which only measures the round trip."""

    name: str
    rtt_ms: float | None = None
    error: str | None = None
    measured: bool = False


@dataclass(slots=True)
class HoldsFound:
    """The workspaces on a worker host reached for the first time: the holds and budget
    extensions their run manifests kept are restored (``SchedulerState.restore_holds``)."""

    workspaces: tuple[RecoveredWorkspace, ...]


@dataclass(slots=True)
class SystemNoted:
    """A scheduler event (not from a session) said by a task off the loop
    (``SchedulerState.emit_system``)."""

    kind: EventKind
    message: str
    issue: Issue | None = None


@dataclass(slots=True)
class RescanDue:
    """The recovered workspaces are stale (a worker host came up): rescan them in the
    background."""


# ---------------------------------------------------------------- pull requests (feedback.py)


@dataclass(slots=True)
class PullRequestsRead:
    """A read of the watched issues' pull requests (``scheduler/feedback.py``): issue id ->
    its pull request (None: none found) and its labels; ``closed``: issues closed or gone
    (no longer watched); ``issues``: every issue read (watched from now on, until closed);
    ``error``: the read failed."""

    links: Mapping[str, PullRequestLink | None]
    labels: Mapping[str, tuple[str, ...]]
    closed: tuple[str, ...] = ()
    issues: Mapping[str, Issue] = field(default_factory=dict)
    error: TrackerError | None = None


@dataclass(slots=True)
class FeedbackReady:
    """A reaction's work off the loop is done (``key``: what it was acting on): ``note``
    for the event log, ``prompt`` the feedback a turn of ``issue`` starts with (None: no
    turn), ``reset`` the issue's reaction count starts over (the retry label). A turn that
    cannot start gives back ``reaction_key`` and the cool-down's ``previous_mono``.
    ``failed``: a label command's removal failed (said once until one succeeds)."""

    issue: Issue
    kind: str
    key: str
    prompt: str | None = None
    note: str | None = None
    reset: bool = False
    reaction_key: str | None = None
    previous_mono: float | None = None
    failed: bool = False


@dataclass(slots=True)
class FeedbackHold:
    """The stop label on an issue that was not running: hold it (no retry)."""

    issue: Issue
    label: str


#: The inputs that belong to one run's session and worker (``Inbox.take_of``).
RUN_INPUTS = (
    AgentTraffic,
    SessionFacts,
    IssueMoved,
    RunUpdated,
    WorkspaceReady,
    SessionOpened,
    SessionClosed,
    TurnStarted,
    TurnEnded,
    BudgetCheck,
    IssueRefreshed,
    HookRan,
    RunNoted,
    HostFailed,
    AttemptEnded,
    RunWorkspaceRemoved,
)


Input = (
    AgentTraffic
    | SessionFacts
    | OperatorCommand
    | CommandDone
    | IssueMoved
    | MoveIntended
    | WorkspaceRemoved
    | Tick
    | TickStarted
    | RunningStates
    | Candidates
    | TickEnded
    | RetryDue
    | RetryFetched
    | WorkerEnded
    | Recovered
    | Reload
    | Barrier
    | RunUpdated
    | WorkspaceReady
    | SessionOpened
    | SessionClosed
    | TurnStarted
    | TurnEnded
    | BudgetCheck
    | IssueRefreshed
    | HookRan
    | RunNoted
    | HostFailed
    | HostLeftovers
    | TrackerFailed
    | AttemptEnded
    | RunWorkspaceRemoved
    | ResourcesSampled
    | ApprovalAsked
    | ApprovalExpired
    | ApprovalWithdrawn
    | ApprovalsCancelled
    | HostProbed
    | HoldsFound
    | SystemNoted
    | RescanDue
    | PullRequestsRead
    | FeedbackReady
    | FeedbackHold
)


#: The inputs that carry a ``reply`` future (asked, or answered when handled).
ASKED = (
    OperatorCommand,
    CommandDone,
    IssueMoved,
    MoveIntended,
    Tick,
    TickStarted,
    RunningStates,
    Candidates,
    TickEnded,
    RetryDue,
    RetryFetched,
    Barrier,
    TurnEnded,
    BudgetCheck,
    AttemptEnded,
    ApprovalAsked,
    ApprovalsCancelled,
)


def reply_of(item: Input) -> asyncio.Future | None:
    """``item``'s ``reply`` future, None for an input that has none."""
    return item.reply if isinstance(item, ASKED) else None


#: Main-lane inputs queued before readers wait (:meth:`Inbox.room`), and the level that
#: lets them go on.
HIGH_WATER = 4_096
LOW_WATER = 1_024
#: Main-lane inputs queued from which the inbox counts as busy (:attr:`Inbox.busy`).
BUSY_MARK = 64


class Inbox:
    """Two FIFO lanes and a wake-up. Only the scheduling loop takes from it (and the
    orchestrator's approval path, one session's inputs: :meth:`take_of`)."""

    def __init__(
        self,
        *,
        high_water: int = HIGH_WATER,
        low_water: int = LOW_WATER,
        busy_mark: int = BUSY_MARK,
        slices: ReadSlices | None = None,
    ) -> None:
        #: The readers' share of each turn of the loop (``scheduler/read_slices.py``).
        self.slices = slices or ReadSlices()
        self._control: deque[Input] = deque()
        self._main: deque[Input] = deque()
        self._wake = asyncio.Event()
        self._high = high_water
        self._low = low_water
        self._busy = busy_mark
        self._room: asyncio.Event | None = None  # set while readers wait for room

    async def room(self, key: object = None) -> None:
        """Return once the main lane is under the high-water mark (at once when it is; then
        after the loop took it down to the low-water mark). Readers call it between
        batches of lines; it always yields to the loop once, and waits for a slice of loop
        time once the readers spent the current one (:class:`ReadSlices`; ``key``, the
        reader's host, is what :meth:`hurry` names)."""
        if len(self._main) < self._high:
            await self.slices.take(key)
            return
        if self._room is None:
            self._room = asyncio.Event()
        await self._room.wait()

    def hurry(self, key: object) -> None:
        """The reader waiting in :meth:`room` with ``key`` holds an agent's request: let
        it go before the readers waiting for a slice (``ReadSlices.hurry``). One past the
        high-water mark still waits for the lane to drain."""
        self.slices.hurry(key)

    @property
    def busy(self) -> bool:
        """True while the main lane holds :data:`BUSY_MARK` inputs or more (sessions that
        can coalesce their streamed deltas do so), or while readers wait for a slice of
        loop time (:attr:`ReadSlices.pressed`)."""
        return len(self._main) >= self._busy or self.slices.pressed

    def take_of(self, run: Run) -> list[Input]:
        """Take ``run``'s queued main-lane inputs (its session's and worker's) out
        of the lane, in their order; the rest keep theirs. For applying them at once,
        ahead of every other session's traffic (an approval request of that run)."""
        main = self._main
        if not main:
            return []
        mine: list[Input] = [i for i in main if isinstance(i, RUN_INPUTS) and i.run is run]
        if not mine:
            return []
        keep = [i for i in main if not (isinstance(i, RUN_INPUTS) and i.run is run)]
        main.clear()
        main.extend(keep)
        if self._room is not None and len(main) <= self._low:
            self._room.set()
            self._room = None
        return mine

    def post(self, item: Input) -> None:
        """Queue ``item`` in the main lane."""
        self._main.append(item)
        if not self._wake.is_set():
            self._wake.set()

    def post_control(self, item: Input) -> None:
        """Queue ``item`` in the control lane (served before anything in the main lane)."""
        self._control.append(item)
        if not self._wake.is_set():
            self._wake.set()

    @property
    def control_waiting(self) -> bool:
        """True while the control lane holds an input."""
        return bool(self._control)

    def __len__(self) -> int:
        return len(self._control) + len(self._main)

    def take(self) -> Input | None:
        """The next input, control lane first; None when both lanes are empty."""
        if self._control:
            return self._control.popleft()
        if self._main:
            item = self._main.popleft()
            if self._room is not None and len(self._main) <= self._low:
                self._room.set()  # wake the readers that wait (room)
                self._room = None
            return item
        return None

    async def wait(self) -> None:
        """Return once an input is queued (at once when one is)."""
        while not self._control and not self._main:
            self._wake.clear()
            await self._wake.wait()

    def drop_all(self) -> list[Input]:
        """Empty both lanes (the loop stopped); returns what was queued, control first."""
        items = [*self._control, *self._main]
        self._control.clear()
        self._main.clear()
        if self._room is not None:
            self._room.set()
            self._room = None
        return items


class InboxFlow(FlowControl):
    """One session's flow control against ``inbox`` (``SessionHost.flow``): :meth:`pace`
    waits for room in the main lane and for a slice of loop time (:meth:`Inbox.room`, this
    object as the reader's key), :meth:`congested` is :attr:`Inbox.busy`, and
    :meth:`hurry` lets this reader go first (:meth:`Inbox.hurry`)."""

    def __init__(self, inbox: Inbox) -> None:
        self._inbox = inbox

    async def pace(self) -> None:
        await self._inbox.room(self)

    def congested(self) -> bool:
        return self._inbox.busy

    def hurry(self) -> None:
        self._inbox.hurry(self)
