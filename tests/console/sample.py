"""Fixed sample data for console tests and screenshots (all datetimes fixed, UTC)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from symphony_tui.domain import (
    ApprovalKind,
    ApprovalRequest,
    ClaimState,
    EventKind,
    IssueRow,
    Question,
    QuestionOption,
    RateLimits,
    RateLimitWindow,
    RecoveredWorkspace,
    RetryRow,
    RunningRow,
    RunStatus,
    Snapshot,
    TokenUsage,
)
from symphony_tui.domain.snapshot import MemoryRow
from tests.console.fake_port import FakePort

NOW = datetime(2026, 11, 2, 10, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


COMMAND_APPROVAL = ApprovalRequest(
    id="demo-1:7",
    issue_id="demo-1",
    issue_identifier="DEMO-1",
    backend="codex",
    kind=ApprovalKind.COMMAND,
    summary="run the test suite",
    command="pytest -q tests/",
    cwd="/ws/DEMO-1",
    reason="needs network for fixtures",
    created_at=ago(95),
    deadline_at=later(1705),
)

QUESTION_APPROVAL = ApprovalRequest(
    id="demo-3:2",
    issue_id="demo-3",
    issue_identifier="DEMO-3",
    backend="codex",
    kind=ApprovalKind.USER_INPUT,
    summary="which database?",
    questions=(
        Question(
            id="db",
            header="Database",
            question="Which database should the cache use?",
            options=(QuestionOption(label="sqlite"), QuestionOption(label="postgres")),
        ),
    ),
    created_at=ago(30),
    deadline_at=later(1770),
)


def sample_snapshot() -> Snapshot:
    return Snapshot(
        generated_at=NOW,
        started_at=ago(3600),
        workflow_path="/work/project/WORKFLOW.md",
        tracker_kind="local",
        backend="codex",
        tracker_states=("Todo", "In Progress", "Done", "Cancelled"),
        issues=(
            IssueRow(
                issue_id="demo-1",
                identifier="DEMO-1",
                title="Write the README",
                state="In Progress",
                claim=ClaimState.RUNNING,
                priority=2,
            ),
            IssueRow(
                issue_id="demo-3",
                identifier="DEMO-3",
                title="Add a cache layer \x1b[31m[bold]red[/bold]\x1b[0m",
                state="In Progress",
                claim=ClaimState.RUNNING,
                priority=1,
            ),
            IssueRow(
                issue_id="demo-2",
                identifier="DEMO-2",
                title="Fix flaky login test",
                state="Todo",
                claim=ClaimState.RETRY_QUEUED,
                priority=3,
            ),
            IssueRow(
                issue_id="demo-4",
                identifier="DEMO-4",
                title="Migrate settings page",
                state="Todo",
                blocked=True,
                priority=4,
            ),
            IssueRow(
                issue_id="demo-5",
                identifier="DEMO-5",
                title="Tidy the changelog",
                state="Todo",
            ),
        ),
        running=(
            RunningRow(
                issue_id="demo-1",
                issue_identifier="DEMO-1",
                state="In Progress",
                backend="codex",
                status=RunStatus.WAITING_FOR_OPERATOR,
                attempt=None,
                session_id="thr-1-turn-3",
                thread_id="thr-1",
                turn_count=3,
                started_at=ago(754),
                last_event="approval_requested",
                last_message="run the test suite",
                last_event_at=ago(95),
                tokens=TokenUsage(
                    input_tokens=42_000,
                    cached_input_tokens=30_000,
                    output_tokens=5_100,
                    reasoning_tokens=1_200,
                    total_tokens=47_100,
                ),
                workspace_path="/ws/DEMO-1",
                pending_approvals=1,
                rss_bytes=1_234_567_890,
                cpu_percent=12.5,
            ),
            RunningRow(
                issue_id="demo-3",
                issue_identifier="DEMO-3",
                state="In Progress",
                backend="codex",
                status=RunStatus.STREAMING_TURN,
                attempt=2,
                session_id="thr-3-turn-1",
                thread_id="thr-3",
                turn_count=1,
                started_at=ago(65),
                last_event="message",
                last_message="Looking at \x1b]52;c;ZXZpbA==\x07the cache [red]module[/red]",
                last_event_at=ago(2),
                tokens=TokenUsage(input_tokens=8_000, output_tokens=900, total_tokens=8_900),
                workspace_path="/ws/DEMO-3",
                pending_approvals=1,
            ),
        ),
        retrying=(
            RetryRow(
                issue_id="demo-2",
                issue_identifier="DEMO-2",
                attempt=3,
                due_at=later(40),
                error="turn_failed: tests failed",
            ),
        ),
        approvals=(QUESTION_APPROVAL, COMMAND_APPROVAL),
        completed=("demo-0",),
        totals=TokenUsage(
            input_tokens=120_500,
            cached_input_tokens=80_000,
            output_tokens=15_250,
            reasoning_tokens=4_000,
            total_tokens=135_750,
        ),
        seconds_running=2_710.0,
        token_rate_per_min=3_450.0,
        token_history=(0, 200, 900, 1500, 800, 3000, 4200, 2500, 3450, 1200, 600, 2800),
        rate_limits=RateLimits(
            source="codex",
            limit_name="codex",
            primary=RateLimitWindow(used_percent=42.0, window_minutes=300, resets_at=later(5400)),
            secondary=RateLimitWindow(
                used_percent=91.0, window_minutes=10080, resets_at=later(86400 * 2)
            ),
        ),
        recovered=(
            RecoveredWorkspace(
                key="DEMO-9",
                path="/ws/DEMO-9",
                issue_id="demo-9",
                issue_identifier="DEMO-9",
                issue_title="Old crashed run",
                issue_state="In Progress",
                backend="codex",
                thread_id="thr-9",
                attempt=2,
                status="failed",
                error="process_exited: codex exited with 1",
                started_at=ago(86400),
                ended_at=ago(86000),
                tokens=TokenUsage(total_tokens=12_000),
                hooks={"after_create": "ok", "before_run": "exit 3"},
            ),
            RecoveredWorkspace(
                key="DEMO-2",
                path="/ws/DEMO-2",
                issue_id="demo-2",
                issue_identifier="DEMO-2",
                issue_title="Fix flaky login test",
                issue_state="Todo",
                backend="codex",
                thread_id="thr-2",
                attempt=3,
                status="failed",
                error="turn_failed: tests failed",
                started_at=ago(400),
                ended_at=ago(300),
                tokens=TokenUsage(total_tokens=3_400),
                hooks={"after_create": "ok", "before_run": "ok"},
            ),
            RecoveredWorkspace(
                key="DEMO-5",
                path="/ws/DEMO-5",
                issue_id="demo-5",
                issue_identifier="DEMO-5",
                issue_title="Tidy the changelog",
                issue_state="Todo",
                status="succeeded",
                attempt=1,
                ended_at=ago(7200),
            ),
        ),
        memory=(
            MemoryRow(
                available_bytes=3_400_000_000,
                total_bytes=17_179_869_184,
                agents_rss_bytes=1_234_567_890,
            ),
        ),
        last_poll_at=ago(10),
        next_poll_at=later(20),
        max_concurrent_agents=4,
    )


def sample_port() -> FakePort:
    port = FakePort(sample_snapshot())
    port.add_event(EventKind.DISPATCH, "dispatched", issue_id="demo-1", identifier="DEMO-1",
                   at=ago(754))  # fmt: skip
    port.add_event(EventKind.HOOK, "after_create: ok in 40 ms", issue_id="demo-1",
                   identifier="DEMO-1", at=ago(753), hook="after_create", ok=True,
                   exit_code=0, output="")  # fmt: skip
    port.add_event(EventKind.HOOK, "before_run: ok in 12 ms", issue_id="demo-1",
                   identifier="DEMO-1", at=ago(752), hook="before_run", ok=True,
                   exit_code=0, output="")  # fmt: skip
    port.add_event(EventKind.SESSION_STARTED, "session thr-1", issue_id="demo-1",
                   identifier="DEMO-1", at=ago(750))  # fmt: skip
    port.add_event(EventKind.PLAN, "Write the README\n[completed] Read the code\n"
                   "[inProgress] Draft README.md\n[pending] Run the tests", issue_id="demo-1",
                   identifier="DEMO-1", at=ago(720),
                   plan=[{"step": "Read the code", "status": "completed"},
                         {"step": "Draft README.md", "status": "inProgress"},
                         {"step": "Run the tests", "status": "pending"}])  # fmt: skip
    port.add_event(EventKind.COMMAND_STARTED, "ls -la", issue_id="demo-1", identifier="DEMO-1",
                   at=ago(700), command="ls -la", item_id="c1")  # fmt: skip
    port.add_event(EventKind.COMMAND_COMPLETED, "ls -la", issue_id="demo-1",
                   identifier="DEMO-1", at=ago(699), command="ls -la", exit_code=0,
                   item_id="c1", output="README.md\nsrc\ntests\n")  # fmt: skip
    port.add_event(EventKind.MESSAGE, "I will write the README now.", issue_id="demo-1",
                   identifier="DEMO-1", at=ago(600))  # fmt: skip
    port.add_event(EventKind.FILE_CHANGE, "edit completed: README.md", issue_id="demo-1",
                   identifier="DEMO-1", at=ago(300), status="completed", paths=["README.md"],
                   changes=[{"path": "README.md", "kind": "add",
                             "diff": "@@ -0,0 +1,3 @@\n+# Demo\n+\n+Run `make` \x1b[31mred\x1b[0m"}],
                   )  # fmt: skip
    port.add_event(EventKind.APPROVAL_REQUESTED, "run the test suite", issue_id="demo-1",
                   identifier="DEMO-1", at=ago(95))  # fmt: skip
    port.add_event(EventKind.DISPATCH, "dispatched (attempt 2)", issue_id="demo-3",
                   identifier="DEMO-3", at=ago(65))  # fmt: skip
    port.add_event(EventKind.MESSAGE, "Evil \x1b[2J\x1b]52;c;ZXZpbA==\x07[bold]markup[/bold]",
                   issue_id="demo-3", identifier="DEMO-3", at=ago(2))  # fmt: skip
    port.add_event(EventKind.ERROR, "tracker timeout", at=ago(1))
    return port


def sample_tools(port: FakePort) -> FakePort:
    """The diff of DEMO-1's workspace and an audit log, for the tools' tests and shots."""
    from symphony_tui.domain.audit import AuditEntry
    from symphony_tui.domain.diff import DiffFile, WorkspaceDiff

    port.diffs["demo-1"] = WorkspaceDiff(
        issue_id="demo-1",
        issue_identifier="DEMO-1",
        workspace_path="/ws/DEMO-1",
        base_kind="merge-base",
        base="origin/main @ 1a2b3c4d5e",
        files=(
            DiffFile(path="README.md", status="M", added=12, removed=3),
            DiffFile(path="docs/usage.md", status="A", added=40, removed=0),
            DiffFile(path="assets/logo.png", status="M", added=None, removed=None, binary=True),
        ),
    )
    port.file_lines["README.md"] = [
        "diff --git a/README.md b/README.md",
        "--- a/README.md",
        "+++ b/README.md",
        "@@ -1,5 +1,14 @@",
        " # demo",
        "-An old line",
        "+A new first line \x1b[31mwith an escape\x1b[0m",
        "+## Usage",
        *[f"+usage line {n}" for n in range(1, 700)],
    ]
    port.file_lines["docs/usage.md"] = ["+++ b/docs/usage.md", "+# Usage"]
    port.file_lines["assets/logo.png"] = []
    port.audit = [
        AuditEntry(at=ago(600), who="ann@console", what="approve", issue="DEMO-3",
                   detail='approval_id="ap-3"', message="DEMO-3: approved"),
        AuditEntry(at=ago(420), who="bob@laptop", via="api 10.0.0.7", what="stop",
                   issue="DEMO-2", ok=False, message="DEMO-2 is not running"),
        AuditEntry(at=ago(300), who="ann@console", what="pause_dispatch", detail="paused=true",
                   message="dispatch paused"),
        AuditEntry(at=ago(120), who="ann@console", what="shell", issue="DEMO-1",
                   detail="/ws/DEMO-1", message="bash exited with 0"),
    ]  # fmt: skip
    return port


def sample_hosts(port: FakePort) -> FakePort:
    """Three worker hosts: one up with both runs, one down (drained, with a
    workspace recovered there), one up and drained; the runs and a recovered workspace
    name their host."""
    from symphony_tui.domain.snapshot import HostRow

    snap = port.current
    running = tuple(r.model_copy(update={"host": "build-1"}) for r in snap.running)
    recovered = tuple(
        w.model_copy(update={"host": "ci@build-2:2222", "path": "/srv/ws/DEMO-9"})
        if w.key == "DEMO-9"
        else w
        for w in snap.recovered
    )
    port.update(
        running=running,
        recovered=recovered,
        memory=(
            MemoryRow(host="build-1", available_bytes=812 * 1024 * 1024,
                      total_bytes=8 * 1024**3, agents_rss_bytes=1_234_567_890,
                      short="host build-1 has 812 MB free, under the 1,024 MB floor"),
        ),
        hosts=(
            HostRow(name="build-1", up=True, running=2, capacity=4, rtt_ms=3.2,
                    since=ago(3600), workspaces=3),
            HostRow(name="ci@build-2:2222", up=False, running=0, capacity=2, rtt_ms=41.0,
                    since=ago(300), drained=True, workspaces=1,
                    last_error="host ci@build-2:2222 refused the connection (ssh exit 255)"),
            HostRow(name="[fd00::7]:22", up=True, running=0, capacity=4, rtt_ms=12.6,
                    since=ago(3600), drained=True),
        ),
    )  # fmt: skip
    return port
