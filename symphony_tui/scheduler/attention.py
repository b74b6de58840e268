"""What needs the operator's attention, found by comparing snapshots, and the
``notify.command`` hook (config/settings.py ``NotifySettings``).

:class:`AttentionWatch` turns each new :class:`~symphony_tui.domain.Snapshot` into the
:class:`Alert` values it brings: an approval or an agent's question that was not pending
before; a retry entry whose attempt reached ``notify.failures`` after a failure (a run
failing attempt after attempt: the retries go on, the operator should look); the tracker
going from reachable to failing; a run newly held by its token budget (it waits for the
operator's ``b``); a worker host going from up to down. Both front ends use it: the console rings the bell and
sends the desktop notification (console/attention.py), and the scheduler runs the hook
(scheduler/notify_hook.py), so headless runs notify too. Snapshots are compared rather than
events read, so a flood of agent events costs nothing here.

Alert text comes partly from agents and trackers (an approval's summary, an error): it is
cleaned to one inert line (:func:`symphony_tui.text.one_line`) before it leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from symphony_tui.domain.kinds import ApprovalKind
from symphony_tui.observability.redact import redact
from symphony_tui.text import one_line

if TYPE_CHECKING:  # the console imports this module before its first frame
    from symphony_tui.config.settings import AlertKind
    from symphony_tui.domain import Snapshot


MESSAGE_LIMIT = 300
_QUESTIONS = (ApprovalKind.USER_INPUT, ApprovalKind.ELICITATION)


@dataclass(frozen=True)
class Alert:
    """One thing for the operator: ``kind`` (a ``notify`` kind), the issue it is about
    (None for the tracker), a short ``title`` and a one-line ``message``, both inert."""

    kind: AlertKind
    issue_identifier: str | None
    title: str
    message: str

    def environment(self) -> dict[str, str]:
        """The facts as ``SYMPHONY_ALERT_*`` variables for ``notify.command``."""
        return {
            "SYMPHONY_ALERT_KIND": self.kind,
            "SYMPHONY_ALERT_ISSUE": self.issue_identifier or "",
            "SYMPHONY_ALERT_TITLE": self.title,
            "SYMPHONY_ALERT_MESSAGE": self.message,
        }


def _line(text: object) -> str:
    return one_line(redact(str(text or "")), MESSAGE_LIMIT)


class AttentionWatch:
    """Feed it every snapshot (:meth:`alerts`); it remembers what it already reported.
    ``failures``: the attempt count at which a failing issue is reported (once per issue
    until its retries end)."""

    def __init__(self, failures: Callable[[], int]) -> None:
        self._failures = failures
        self._approvals: set[str] = set()
        self._failing: set[str] = set()
        self._tracker_error: str | None = None
        self._held: set[str] = set()
        self._down: set[str] = set()
        self._last: Snapshot | None = None

    def alerts(self, snapshot: Snapshot) -> list[Alert]:
        """The alerts ``snapshot`` brings since the previous one (none for the same one)."""
        if snapshot is self._last:
            return []
        self._last = snapshot
        out: list[Alert] = []
        pending = {a.id for a in snapshot.approvals}
        for approval in snapshot.approvals:
            if approval.id in self._approvals:
                continue
            question = approval.kind in _QUESTIONS
            what = approval.summary or approval.command or approval.kind.value
            out.append(
                Alert(
                    kind="question" if question else "approval",
                    issue_identifier=approval.issue_identifier or None,
                    title=f"{approval.issue_identifier}: "
                    + ("the agent asks a question" if question else "approval needed"),
                    message=_line(what),
                )
            )
        self._approvals = pending
        threshold = self._failures()
        failing = set()
        for retry in snapshot.retrying:
            if retry.error is None or retry.attempt < threshold:
                continue
            failing.add(retry.issue_id)
            if retry.issue_id not in self._failing:
                out.append(
                    Alert(
                        kind="failed",
                        issue_identifier=retry.issue_identifier,
                        title=f"{retry.issue_identifier}: failed {retry.attempt} times in a row",
                        message=_line(retry.error),
                    )
                )
        running = {r.issue_id for r in snapshot.running}
        self._failing = failing | (self._failing & running)  # a retry running is still failing
        error = snapshot.tracker_error
        if error is not None and self._tracker_error is None:
            out.append(Alert("tracker", None, "tracker unreachable", _line(error)))
        self._tracker_error = error
        held = {r.issue_id for r in snapshot.running if r.budget_reached}
        for row in snapshot.running:
            if row.budget_reached and row.issue_id not in self._held:
                title = f"{row.issue_identifier}: held by its token budget"
                out.append(Alert("budget", row.issue_identifier, title, _line(row.budget_reached)))
        self._held = held
        down = {h.name for h in snapshot.hosts if not h.up}
        for host in snapshot.hosts:
            if not host.up and host.name not in self._down:
                title = f"worker host {host.name} down"
                out.append(Alert("host", None, title, _line(host.last_error or "unreachable")))
        self._down = down
        return out
