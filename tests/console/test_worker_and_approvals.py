"""Worker detail (hooks, plan, diffs, its own keys) and the cancel-turn key."""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from textual.widgets import Button

from symphony_tui.agents.codex.events import cap_tail
from symphony_tui.console.screens.approvals import ApprovalsScreen, approval_keys
from symphony_tui.console.screens.modals import Confirm
from symphony_tui.console.screens.worker import WRITE_CHARS, WorkerScreen
from symphony_tui.console.tones import Tones
from symphony_tui.console.transcript import Transcript, diff_text, tail
from symphony_tui.console.widgets.issues import IssuesTable
from symphony_tui.domain import (
    AgentEvent,
    ApprovalDecision,
    ApprovalKind,
    ClaimState,
    Deny,
    EventKind,
    Rerun,
    Stop,
)
from symphony_tui.domain.payloads import CommandEnded, ItemNote
from symphony_tui.scheduler.port import TranscriptGap
from tests.console.helpers import SIZE, done, plain, settle
from tests.console.sample import COMMAND_APPROVAL, NOW


def transcript_text(screen) -> str:
    log = screen.query_one("#transcript")
    return "\n".join("".join(seg.text for seg in strip).rstrip() for strip in log.lines)


async def open_worker(pilot, issue_id: str) -> WorkerScreen:
    pilot.app.open_worker(issue_id)
    await settle(pilot)
    await settle(pilot)
    assert isinstance(pilot.app.screen, WorkerScreen)
    return pilot.app.screen


async def test_worker_detail_shows_hooks_plan_and_diff(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_worker(pilot, "demo-1")
        header = plain(screen.query_one("#worker-header").render())
        assert "hooks ✓ after_create · ✓ before_run   plan 1/3 ▸ Draft README.md" in header
        assert "⚑ 1 approval(s) pending: run the test suite" in header.splitlines()[2]
        lines = transcript_text(screen)
        assert "plan Write the README  1/3 done" in lines
        assert "✓ Read the code" in lines and "▸ Draft README.md" in lines
        assert "○ Run the tests" in lines
        assert "± README.md  add" in lines
        assert "+# Demo" in lines and "@@ -0,0 +1,3 @@" in lines
        assert "\x1b" not in lines and "Run `make` red" in lines  # diff text is inert
        assert "⚙ hook before_run: ok in 12 ms" in lines
        # a failing hook updates the header live and shows its output tail
        port.add_event(EventKind.HOOK, "after_run: exit 2 in 5 ms", issue_id="demo-1",
                       identifier="DEMO-1", at=NOW, hook="after_run", ok=False, exit_code=2,
                       output="lint failed\n")  # fmt: skip
        await settle(pilot)
        header = plain(screen.query_one("#worker-header").render())
        assert "✗ after_run exit 2 in 5 ms" in header
        lines = transcript_text(screen)
        assert "lint failed" in lines
        assert "⚙ hook after_run: exit 2 in 5 ms" in lines and "hook hook" not in lines


def test_a_file_change_names_each_path_once():
    t = Transcript(Tones())
    path = "/ws/DEMO-5/NOTES-DEMO-5.md"
    listed = AgentEvent(
        kind=EventKind.FILE_CHANGE,
        message=f"editing {path}",
        data={"paths": [path, path], "changes": [{"path": path}, "oops"]},
    )
    assert t.body(listed).plain.count(path) == 1
    names_only = AgentEvent(
        kind=EventKind.FILE_CHANGE, message="edit", data={"files": [path, "b.md", path]}
    )
    assert t.body(names_only).plain == f"± {path}, b.md"


def test_an_operator_note_reads_as_sent_to_the_agent():
    t = Transcript(Tones())
    note = AgentEvent(
        kind=EventKind.NOTIFICATION,
        message="sent to the agent: Their message: use \x1b[31mstaging[/b]",
        data={"operator_note": True},
    )
    assert t.body(note).plain == "→ to the agent Their message: use staging[/b]"


def test_workspace_notes_are_not_called_hooks():
    t = Transcript(Tones())
    note = AgentEvent(kind=EventKind.HOOK, message="workspace created at /ws/DEMO-1")
    assert t.body(note).plain == "⚙ workspace created at /ws/DEMO-1"


def test_file_change_in_progress_shows_no_diff_and_long_diffs_are_cut():
    t = Transcript(Tones())
    started = AgentEvent(
        kind=EventKind.FILE_CHANGE,
        message="editing a.py",
        data={"status": "inProgress", "changes": [{"path": "a.py", "diff": "+x"}]},
    )
    body = t.body(started).plain
    assert "a.py" in body and "inProgress" in body and "+x" not in body
    long = diff_text("\n".join(f"+line {i}" for i in range(100)), Tones(), limit=10)
    assert long.plain.count("\n") == 10 and "90 more diff lines" in long.plain


async def test_worker_keys_interrupt_stop_and_rerun(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_worker(pilot, "demo-1")
        keys = {k: b.binding.description for k, b in screen.active_bindings.items()}
        assert keys["i"] == "Interrupt" and keys["s"] == "Stop" and "r" not in keys
        await pilot.press("s", "y")
        await done(pilot)
        assert port.sent == [Stop(issue_id="demo-1")]
        # not running any more: rerun appears, interrupt/stop leave the footer
        port.update(running=port.current.running[1:])
        await settle(pilot)
        bindings = screen.active_bindings
        assert bindings["r"].binding.description == "Rerun" and bindings["r"].enabled
        assert "i" not in bindings and "s" not in bindings
        header = plain(screen.query_one("#worker-header").render())
        assert "■ not running" in header
        await pilot.press("r")
        await done(pilot)
        assert port.sent[-1] == Rerun(issue_id="demo-1")


async def test_worker_detail_of_an_ended_run_shows_its_manifest(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_worker(pilot, "demo-9")
        header = plain(screen.query_one("#worker-header").render())
        assert "DEMO-9  Old crashed run" in header
        assert "last run failed  attempt 2" in header and "thread thr-9" in header
        assert "/ws/DEMO-9" in header and "process_exited" in header
        assert "✗ before_run exit 3" in header
        assert screen.check_action("rerun_worker", ()) is False  # unknown to the tracker


async def test_transcript_follow_toggle(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_worker(pilot, "demo-1")
        log = screen.query_one("#transcript")
        await pilot.press("f")
        assert not log.auto_scroll and "follow off" in str(log.border_title)
        await pilot.press("f")
        assert log.auto_scroll


async def test_enter_on_an_issue_row_opens_its_detail(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("1")
        assert app.screen.query_one(IssuesTable).select_key("demo-5")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, WorkerScreen) and app.screen.issue_id == "demo-5"
        await pilot.press("escape")
        assert not isinstance(app.screen, WorkerScreen)


def test_approval_keys_follow_what_is_offered():
    assert approval_keys(COMMAND_APPROVAL) == [
        "approve",
        "approve_session",
        "deny",
        "deny_message",
        "cancel_turn",
    ]
    narrow = COMMAND_APPROVAL.model_copy(
        update={"available": (ApprovalDecision.ACCEPT, ApprovalDecision.DECLINE)}
    )
    assert approval_keys(narrow) == ["approve", "deny", "deny_message"]
    perms = COMMAND_APPROVAL.model_copy(
        update={"kind": ApprovalKind.PERMISSIONS, "permissions": {"network": {"enabled": True}}}
    )
    assert "grant" in approval_keys(perms)


async def test_cancel_turn_asks_then_denies_with_cancel(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, ApprovalsScreen)
        app.screen.query_one("#approvals").select_key("demo-1:7")
        await settle(pilot)
        detail = plain(app.screen.query_one("#approval-detail").render())
        assert "c cancel turn" in detail
        assert "A approve for session" in detail  # what A does: for the rest of the session
        await pilot.press("c")
        assert isinstance(app.screen, Confirm)
        buttons = [str(b.label) for b in app.screen.query(Button)]
        assert buttons == ["Deny and end turn (y)", "Keep the turn (n)"]  # no two "Cancel"s
        await pilot.press("n")
        await done(pilot)
        assert port.sent == []
        await pilot.press("c", "y")
        await done(pilot)
        assert port.sent == [Deny(approval_id="demo-1:7", cancel=True)]


async def test_cancel_turn_unavailable_when_not_offered(port, make_app):
    narrow = COMMAND_APPROVAL.model_copy(
        update={"available": (ApprovalDecision.ACCEPT, ApprovalDecision.DECLINE)}
    )
    port.update(approvals=(narrow,))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert app.check_action("cancel_turn", ()) is False
        assert "cancel turn" not in plain(app.screen.query_one("#approval-detail").render())
        await pilot.press("c")
        await done(pilot)
        assert not isinstance(app.screen, Confirm) and port.sent == []


def test_streamed_output_of_commands_that_never_complete_is_bounded_by_bytes():
    """A command's streamed output is kept until it completes; of commands that never do
    (interrupted turns), only the newest items' are kept, not 64 K characters each for the
    screen's lifetime (about 13 MB): bytes read with tracemalloc."""
    t = Transcript(Tones())
    chunk = "out\n" * 4096  # 16 K characters

    def output(item: str) -> AgentEvent:
        return AgentEvent(
            kind=EventKind.COMMAND_OUTPUT, message=chunk, payload=ItemNote(item_id=item)
        )

    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for n in range(200):
            for _ in range(5):
                assert t.body(output(f"cmd-{n}")) is None
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert held < 2 * 1024 * 1024, f"{held / 1e6:.1f} MB"
    # the newest command still shows the tail of what it streamed once it completes
    ended = AgentEvent(
        kind=EventKind.COMMAND_COMPLETED,
        message="make",
        payload=CommandEnded(command="make", exit_code=0, item_id="cmd-199"),
    )
    body = t.body(ended).plain
    assert "✓ make  exit 0" in body and "out" in body and "more lines" in body


def test_a_cut_command_output_counts_only_the_kept_lines_and_says_it_was_cut():
    # the adapter keeps the last 64 KiB of a 5,000-line output after a "characters cut" line
    full = "\n".join(f"seq-line {i:04d}" for i in range(5000)) + "\n"
    output = cap_tail(full)
    cut = len(full) - (len(output) - output.index("\n") - 1)
    kept_lines = output.rstrip("\n").count("\n")  # lines after the marker line
    ended = AgentEvent(
        kind=EventKind.COMMAND_COMPLETED,
        message="seq-test 5000",
        payload=CommandEnded(command="seq-test 5000", exit_code=0, output=output),
    )
    body = Transcript(Tones()).body(ended).plain.split("\n")
    assert body[0] == "✓ seq-test 5000  exit 0"
    assert body[1] == f"… {kept_lines - 8:,} more lines, {cut:,} characters cut before them"
    assert body[2:] == [f"seq-line {i:04d}" for i in range(4992, 5000)]
    assert "characters cut]" not in "\n".join(body)


def test_streamed_output_cut_by_the_console_is_said_too():
    t = Transcript(Tones())
    full = "".join(f"out {i:05d}\n" for i in range(10_000))  # 100 K characters
    for start in range(0, len(full), 7000):
        chunk = full[start : start + 7000]
        event = AgentEvent(
            kind=EventKind.COMMAND_OUTPUT, message=chunk, payload=ItemNote(item_id="c")
        )
        assert t.body(event) is None
    ended = AgentEvent(
        kind=EventKind.COMMAND_COMPLETED,
        message="make",
        payload=CommandEnded(command="make", exit_code=0, item_id="c"),
    )
    body = t.body(ended).plain.split("\n")
    kept = 64 * 1024 // 10  # whole 10-character lines in the console's 64 K keep
    assert (
        body[1]
        == f"… {kept - 8:,} more lines, {len(full) - kept * 10:,} characters cut before them"
    )
    assert body[-1] == "out 09999"


def test_short_output_after_a_cut_says_only_the_characters():
    text = tail("[... 123 characters cut]\nlast\n")
    assert text == "… 123 earlier characters cut\nlast"
    assert tail("a\nb") == "a\nb"


async def test_a_transcript_that_lost_its_oldest_entries_says_so_first(port, make_app):
    port.gaps["demo-1"] = TranscriptGap(events=1234, bytes=99_000, event_file="/var/ev.jsonl")
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_worker(pilot, "demo-1")
        lines = transcript_text(screen).split("\n")
        assert lines[0].startswith("1,234 earlier events of this issue were dropped (memory")
        assert "/var/ev.jsonl" in transcript_text(screen)
        port.add_event(EventKind.MESSAGE, "later", issue_id="demo-1", identifier="DEMO-1", at=NOW)
        await settle(pilot)
        assert transcript_text(screen).count("earlier events of this issue") == 1  # once


async def test_a_whole_transcript_has_no_dropped_line(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_worker(pilot, "demo-1")
        assert "dropped" not in transcript_text(screen)


async def test_a_flood_of_long_messages_writes_only_the_newest_and_says_so(port, make_app):
    # 60 messages of 12,000 characters: rendering them all freezes the console for seconds
    for i in range(60):
        port.add_event(
            EventKind.MESSAGE,
            f"m{i:02}w" + "w" * 12_000,
            issue_id="demo-1",
            identifier="DEMO-1",
            at=NOW,
        )
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_worker(pilot, "demo-1")
        text = transcript_text(screen)
        assert "earlier events not shown here" in text
        assert "m59w" in text  # the newest are written
        assert "m00w" not in text  # the oldest are not
        shown = sum(f"m{i:02}w" in text for i in range(60))
        assert 0 < shown <= WRITE_CHARS // 12_000 + 1
        assert len(screen.query_one("#transcript").lines) < 5000


async def test_an_interrupted_issue_reads_held_as_the_docs_say(port, make_app):
    issues = tuple(
        row.model_copy(update={"claim": ClaimState.RELEASED, "note": "held by operator"})
        if row.issue_id == "demo-5"
        else row
        for row in port.current.issues
    )
    port.update(issues=issues)
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(IssuesTable)
        cells = [str(c) for c in table.get_row("demo-5")]
        assert "◌ held" in cells and not any("released" in c for c in cells)


THREAD = "019a4f2e-7c1d-7b02-9f5e-3c2a1d0e8b47"
TURN = "019a4f2e-91aa-7c33-8d21-5b6f0e4c2a19"
ISSUE = "8f14e45f-ceea-467a-9af0-3b2c1d0e8f71"


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_worker_header_keeps_each_id_whole_on_one_line(port, make_app, size):
    # codex ids: UUIDs; its session id is the thread id and the turn id joined by "-"
    rows = tuple(
        r.model_copy(
            update={"session_id": f"{THREAD}-{TURN}", "thread_id": THREAD, "issue_id": ISSUE}
        )
        if r.issue_id == "demo-1"
        else r
        for r in port.current.running
    )
    port.update(running=rows)
    app = make_app(port)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        app.push_screen(WorkerScreen(ISSUE))
        await settle(pilot)
        header = app.screen.query_one("#worker-header")
        strips = header.render_lines(header.region.reset_offset)
        lines = ["".join(segment.text for segment in strip) for strip in strips]
        for name, value in (("issue", ISSUE), ("thread", THREAD), ("turn id", TURN)):
            assert any(f"{name} {value}" in line for line in lines), (name, lines)


async def test_a_finished_runs_header_keeps_its_thread_id_with_its_name_at_80x24(port, make_app):
    recovered = tuple(
        w.model_copy(update={"thread_id": THREAD}) if w.key == "DEMO-9" else w
        for w in port.current.recovered
    )
    port.update(recovered=recovered)
    app = make_app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(WorkerScreen("demo-9"))
        await settle(pilot)
        header = app.screen.query_one("#worker-header")
        strips = header.render_lines(header.region.reset_offset)
        lines = ["".join(segment.text for segment in strip) for strip in strips]
        assert any(f"thread {THREAD}" in line for line in lines), lines
        assert any("last run failed  attempt 2" in line for line in lines), lines
