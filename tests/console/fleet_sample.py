"""A fleet console's port for console tests, shaped as the fleet contract says.

:class:`FleetTestPort` stands in for ``symphony_tui.fleet``'s port: one merged snapshot of
three schedulers (``projects`` rows, ``project`` on every row, ids namespaced
``"<project>/<id>"``, the identifier ``#12`` in two projects), events with ``project``
set, and ``send`` routing as the contract says: by the namespaced id's prefix (stripped
before it reaches the scheduler), else by ``command.project``, else refused "choose a
project"; a refusal starts with the project's name.
"""

from __future__ import annotations

from symphony_tui.domain import (
    AgentEvent,
    ApprovalKind,
    ApprovalRequest,
    ClaimState,
    EventKind,
    IssueRow,
    RateLimits,
    RateLimitWindow,
    RetryRow,
    RunningRow,
    RunStatus,
    Snapshot,
    TokenUsage,
)
from symphony_tui.domain.commands import Command
from symphony_tui.domain.snapshot import ProjectRow
from symphony_tui.scheduler.port import CommandResult
from tests.console.fake_port import FakePort
from tests.console.sample import NOW, ago, later

#: The fleet's projects, in the order the port lists them.
API, WEB, BILLING = "api", "web", "billing-service-backend"

_ID_FIELDS = ("issue_id", "approval_id")


def fleet_snapshot() -> Snapshot:
    """Three projects: ``api`` live (one run, one approval), ``web`` stale for 32 s (one
    run, one retry entry, one approval; its ``#12`` repeats ``api``'s), and a long-named
    one live on machine ``build-1`` (one run waiting on the oldest approval, dispatch
    paused)."""
    api_approval = ApprovalRequest(
        id="api/ap-1",
        issue_id="api/i-12",
        issue_identifier="#12",
        backend="codex",
        kind=ApprovalKind.COMMAND,
        summary="run the migrations",
        command="make migrate",
        created_at=ago(200),
        deadline_at=later(1600),
        project=API,
    )
    web_approval = ApprovalRequest(
        id="web/ap-1",
        issue_id="web/i-12",
        issue_identifier="#12",
        backend="codex",
        kind=ApprovalKind.COMMAND,
        summary="npm install",
        command="npm install",
        created_at=ago(40),
        deadline_at=later(1760),
        project=WEB,
    )
    billing_approval = ApprovalRequest(
        id="billing-service-backend/ap-9",
        issue_id="billing-service-backend/b-3",
        issue_identifier="BIL-3",
        backend="opencode",
        kind=ApprovalKind.FILE_CHANGE,
        summary="edit invoices.py",
        created_at=ago(500),
        deadline_at=later(1300),
        project=BILLING,
    )
    return Snapshot(
        generated_at=NOW,
        started_at=ago(3600),
        tracker_kind="fleet",
        backend="fleet",
        issues=(
            IssueRow(
                issue_id="api/i-12",
                identifier="#12",
                title="Fix login redirect",
                state="In Progress",
                claim=ClaimState.RUNNING,
                priority=2,
                project=API,
            ),
            IssueRow(
                issue_id="api/i-14",
                identifier="#14",
                title="Rate limit the search API",
                state="Todo",
                priority=3,
                project=API,
            ),
            IssueRow(
                issue_id="web/i-12",
                identifier="#12",
                title="Dark mode toggle",
                state="In Progress",
                claim=ClaimState.RUNNING,
                priority=1,
                project=WEB,
            ),
            IssueRow(
                issue_id="web/i-15",
                identifier="#15",
                title="Flaky e2e checkout test",
                state="Todo",
                claim=ClaimState.RETRY_QUEUED,
                priority=2,
                project=WEB,
            ),
            IssueRow(
                issue_id="billing-service-backend/b-3",
                identifier="BIL-3",
                title="Invoice rounding",
                state="In Progress",
                claim=ClaimState.RUNNING,
                priority=1,
                project=BILLING,
            ),
        ),
        running=(
            RunningRow(
                issue_id="api/i-12",
                issue_identifier="#12",
                state="In Progress",
                backend="codex",
                status=RunStatus.WAITING_FOR_OPERATOR,
                turn_count=2,
                started_at=ago(420),
                last_event="approval_requested",
                last_message="run the migrations",
                pending_approvals=1,
                tokens=TokenUsage(input_tokens=20_000, output_tokens=2_000, total_tokens=22_000),
                workspace_path="/ws/api/12",
                project=API,
            ),
            RunningRow(
                issue_id="web/i-12",
                issue_identifier="#12",
                state="In Progress",
                backend="codex",
                status=RunStatus.STREAMING_TURN,
                turn_count=4,
                started_at=ago(900),
                last_event="message",
                last_message="Wiring the toggle into the theme provider",
                pending_approvals=1,
                tokens=TokenUsage(input_tokens=50_000, output_tokens=4_000, total_tokens=54_000),
                workspace_path="/ws/web/12",
                project=WEB,
            ),
            RunningRow(
                issue_id="billing-service-backend/b-3",
                issue_identifier="BIL-3",
                state="In Progress",
                backend="opencode",
                status=RunStatus.WAITING_FOR_OPERATOR,
                turn_count=1,
                started_at=ago(600),
                last_event="approval_requested",
                last_message="edit invoices.py",
                pending_approvals=1,
                tokens=TokenUsage(input_tokens=9_000, output_tokens=800, total_tokens=9_800),
                workspace_path="/srv/ws/BIL-3",
                project=BILLING,
            ),
        ),
        retrying=(
            RetryRow(
                issue_id="web/i-15",
                issue_identifier="#15",
                attempt=2,
                due_at=later(30),
                error="turn_failed: e2e timeout",
                project=WEB,
            ),
        ),
        approvals=(api_approval, web_approval, billing_approval),
        totals=TokenUsage(input_tokens=79_000, output_tokens=6_800, total_tokens=85_800),
        seconds_running=1_920.0,
        token_rate_per_min=2_100.0,
        token_history=(0, 300, 800, 1200, 900, 2100),
        workflow_path="",
        max_concurrent_agents=0,
        projects=(
            ProjectRow(
                name=API,
                target="/home/ann/src/api/WORKFLOW.md",
                workflow_path="/home/ann/src/api/WORKFLOW.md",
                link_state="live",
                age_s=0.4,
                running=1,
                approvals=1,
                totals=TokenUsage(input_tokens=20_000, output_tokens=2_000, total_tokens=22_000),
                rate_limits=RateLimits(
                    source="codex",
                    limit_name="codex",
                    primary=RateLimitWindow(used_percent=42.0, window_minutes=300),
                ),
            ),
            ProjectRow(
                name=WEB,
                target="http://127.0.0.1:8765",
                link_state="stale",
                age_s=32.0,
                error="connection refused",
                running=1,
                retrying=1,
                approvals=1,
                totals=TokenUsage(input_tokens=50_000, output_tokens=4_000, total_tokens=54_000),
                max_concurrent_agents=4,
                seconds_running=900.0,
                token_rate_per_min=1_500.0,
                token_history=(0, 200, 1500),
                runs_unpriced=1,
            ),
            ProjectRow(
                name=BILLING,
                target="ssh://ci@build-1",
                machine="build-1",
                workflow_path="/srv/billing/WORKFLOW.md",
                link_state="live",
                age_s=1.2,
                running=1,
                approvals=1,
                dispatch_paused=True,
                totals=TokenUsage(input_tokens=9_000, output_tokens=800, total_tokens=9_800),
            ),
        ),
    )


class FleetTestPort(FakePort):
    """The merged snapshot above; ``send`` routes as the fleet port does and records
    ``(project, command as the scheduler gets it)`` in ``routed``; ``refuse`` maps a
    project to the reason its scheduler refuses every command."""

    detach_only = True

    def __init__(self, snapshot: Snapshot | None = None) -> None:
        super().__init__(snapshot if snapshot is not None else fleet_snapshot())
        self.routed: list[tuple[str, Command]] = []
        self.refuse: dict[str, str] = {}
        names = {p.name for p in self.current.projects}
        at = ago(120)
        for project, issue_id, ident, kind, message in (
            (API, "api/i-12", "#12", EventKind.DISPATCH, "dispatched"),
            (WEB, "web/i-12", "#12", EventKind.MESSAGE, "Wiring the toggle"),
            (BILLING, "billing-service-backend/b-3", "BIL-3", EventKind.APPROVAL_REQUESTED,
             "edit invoices.py"),
            (API, "api/i-12", "#12", EventKind.APPROVAL_REQUESTED, "run the migrations"),
        ):  # fmt: skip
            assert project in names
            self.events.append(
                AgentEvent(
                    kind=kind,
                    message=message,
                    issue_id=issue_id,
                    issue_identifier=ident,
                    at=at,
                    seq=len(self.events) + 1,
                    project=project,
                )
            )

    async def send(
        self, command: Command, *, who: str | None = None, via: str = "console"
    ) -> CommandResult:
        self.sent.append(command)
        names = {p.name for p in self.current.projects}
        field = next((f for f in _ID_FIELDS if isinstance(getattr(command, f, None), str)), None)
        if field is not None:
            project, _, local = getattr(command, field).partition("/")
            if project not in names:
                return CommandResult(False, f"no project named {project!r} in this fleet")
            command = command.model_copy(update={field: local})
        elif command.project in names:
            project = command.project
        else:
            return CommandResult(False, "choose a project")
        command = command.model_copy(update={"project": None})
        if project in self.refuse:
            return CommandResult(False, f"{project}: {self.refuse[project]}")
        self.routed.append((project, command))
        return CommandResult(True, f"{project}: {command.type} accepted")
