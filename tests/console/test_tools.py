"""The operator's tools in the console (console/workspace_actions.py, console/exports.py):
diff, audit, into the workspace, export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from symphony_tui.console.exports import export_lines
from symphony_tui.console.screens.audit import AuditScreen
from symphony_tui.console.screens.diff import DiffScreen
from symphony_tui.console.screens.modals import AskText, Choose
from symphony_tui.console.workspace_actions import run_in_terminal
from symphony_tui.domain import EventKind
from tests.console.helpers import SIZE, done, notifications, settle
from tests.console.sample import sample_tools


@pytest.fixture
def tools_port(port):
    return sample_tools(port)


def text_of(app, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def test_diff_screen_lists_files_and_pages_the_diff(tools_port, make_app):
    app = make_app(tools_port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2", "equals_sign")
        await done(pilot)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen) and screen.issue_id == "demo-1"
        table = screen.query_one("#diff-files", DataTable)
        assert table.row_count == 3
        counts = [str(table.get_row_at(i)[0]) for i in range(3)]  # the +/- column comes first
        assert "binary" in counts and "+12 -3" in counts
        header = text_of(app, "#diff-header")
        assert "+52" in header and "-3" in header and "origin/main" in header
        body = text_of(app, "#diff-text")
        assert "A new first line" in body and "\x1b" not in body
        assert "lines 1-400 of 707" in body
        await pilot.press("right_square_bracket")
        await done(pilot)
        assert screen.page is not None and screen.page.offset == 400
        assert "lines 401-707 of 707" in text_of(app, "#diff-text")
        await pilot.press("left_square_bracket")
        await done(pilot)
        assert screen.page.offset == 0
        await pilot.press("down", "down")
        await done(pilot)
        await settle(pilot)
        assert "binary file (not shown)" in text_of(app, "#diff-text")
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, DiffScreen)


async def test_diff_says_why_when_there_is_nothing(port, make_app):
    app = make_app(port)  # no diff scripted: the port answers with an error
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2", "equals_sign")
        await done(pilot)
        await settle(pilot)
        assert "has no workspace here" in text_of(app, "#diff-header")
        # an issue without a workspace has no diff key
        app.pop_screen()
        await settle(pilot)
        await pilot.press("1", "end")
        await settle(pilot)
        assert app.check_action("show_diff", ()) is (
            app.state.workspace_of(app._issue()) is not None
        )


async def test_audit_screen_shows_who_did_what(tools_port, make_app):
    app = make_app(tools_port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("H")
        await done(pilot)
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        table = app.screen.query_one("#audit", DataTable)
        assert table.row_count == 4
        row = [str(c) for c in table.get_row_at(1)]
        assert "bob@laptop" in row and "stop" in row and "refused" in row
        tools_port.audit.append(tools_port.audit[0].model_copy(update={"what": "deny"}))
        await app.screen.load().wait()
        assert table.row_count == 5
        # the decision precisely: approve for the session is not a plain approve
        assert [str(c) for c in table.get_row_at(0)][2] == "approve"
        session = tools_port.audit[0].model_copy(
            update={"detail": 'approval_id="ap-4" for_session=true'}
        )
        tools_port.audit.append(session)
        await app.screen.load().wait()
        assert [str(c) for c in table.get_row_at(5)][2] == "approve for this session"


def test_the_audit_what_says_the_decision():
    from symphony_tui.console.screens.audit import action_words

    assert action_words("deny", 'approval_id="a" cancel=true') == "deny and cancel the turn"
    assert action_words("deny", 'approval_id="a" message="cancel=true"') == "deny"
    assert action_words("pause_dispatch", "paused=false") == "resume dispatch"
    assert action_words("pause_dispatch", "paused=true") == "pause dispatch"
    assert action_words("stop_scheduler", "") == "stop scheduler"


async def test_audit_screen_says_when_the_log_is_unreachable(tools_port, make_app):
    tools_port.audit_error = RuntimeError("503: scheduler busy")
    app = make_app(tools_port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("H")
        await done(pilot)
        assert "audit log unavailable: 503" in text_of(app, "#audit-header")


async def choose_workspace(app, pilot) -> Choose:
    await settle(pilot)
    await pilot.press("2", "o")
    await settle(pilot)
    assert isinstance(app.screen, Choose)
    return app.screen


async def test_into_the_workspace_runs_a_shell_there_and_audits_it(
    tools_port, make_app, tmp_path, monkeypatch
):
    ws = tmp_path / "DEMO-1"
    ws.mkdir()
    running = tools_port.current.running[0].model_copy(update={"workspace_path": str(ws)})
    tools_port.update(running=(running, *tools_port.current.running[1:]))
    monkeypatch.setenv("SHELL", "/bin/bash")
    monkeypatch.setenv("EDITOR", "vim -p")
    ran: list[tuple[list[str], str]] = []

    async def fake_launch(argv, cwd, suspend):
        ran.append((list(argv), cwd))
        return True, "bash exited with 0"

    app = make_app(tools_port)
    monkeypatch.setattr(type(app), "launch", staticmethod(fake_launch))
    async with app.run_test(size=SIZE) as pilot:
        dialog = await choose_workspace(app, pilot)
        labels = [label for label, _ in dialog._choices]
        assert labels[:2] == ["Open a shell there", "Open it in the editor"]
        await pilot.press("enter")
        await done(pilot)
        await choose_workspace(app, pilot)
        await pilot.press("down", "enter")
        await done(pilot)
    assert ran == [(["/bin/bash"], str(ws)), (["vim", "-p", str(ws)], str(ws))]
    assert [(e.what, e.issue, e.ok) for e in tools_port.audit[-2:]] == [
        ("shell", "DEMO-1", True),
        ("editor", "DEMO-1", True),
    ]


async def test_copy_choices_use_the_clipboard(tools_port, make_app, monkeypatch):
    copied: list[str] = []
    app = make_app(tools_port)
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await choose_workspace(app, pilot)
        labels = [label for label, _ in dialog._choices]
        # /ws/DEMO-1 is not a folder here: no shell or editor, and the dialog says why
        assert labels == [
            "Copy the workspace path",
            "Copy the issue identifier",
            "Copy the thread / session id",
            "Copy a shell command",
        ]
        assert "is not a folder on this machine" in str(dialog._body)
        for n in range(4):
            if n:
                await choose_workspace(app, pilot)
            await pilot.press(*["down"] * n, "enter")
            await done(pilot)
    assert copied == ["/ws/DEMO-1", "DEMO-1", "thr-1", "cd /ws/DEMO-1"]
    assert [e.what for e in tools_port.audit[-4:]] == ["copy"] * 4


async def test_an_attached_console_offers_no_shell_and_says_why(tools_port, make_app, tmp_path):
    ws = tmp_path / "DEMO-1"
    ws.mkdir()
    running = tools_port.current.running[0].model_copy(update={"workspace_path": str(ws)})
    tools_port.update(running=(running, *tools_port.current.running[1:]))
    app = make_app(tools_port, detach_only=True)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await choose_workspace(app, pilot)
        labels = [label for label, _ in dialog._choices]
        assert "Open a shell there" not in labels and "Copy a shell command" in labels
        assert "this console is attached" in str(dialog._body)


async def test_export_writes_the_filtered_log(tools_port, make_app, tmp_path):
    app = make_app(tools_port)
    target = tmp_path / "log.txt"
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"DEMO-1", "enter")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, AskText)
        await pilot.press(*str(target), "enter")
        await done(pilot)
        # an existing file is never overwritten
        await pilot.press("e")
        await settle(pilot)
        await pilot.press(*str(target), "enter")
        await done(pilot)
        assert any("File exists" in m for m, s in notifications(app) if s == "error")
    lines = target.read_text().splitlines()
    expected = [e for e in tools_port.events if e.issue_id == "demo-1"]
    assert len(lines) == len(expected) and all(" DEMO-1 " in line for line in lines)
    assert [(e.what, e.ok) for e in tools_port.audit[-2:]] == [("export", True), ("export", False)]


async def test_export_to_a_folder_writes_the_default_name_there(tools_port, make_app, tmp_path):
    app = make_app(tools_port)
    folder = tmp_path / "exports"
    folder.mkdir()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        await pilot.press(*str(folder), "enter")
        await done(pilot)
        assert not [m for m, s in notifications(app) if s == "error"]
    (written,) = folder.iterdir()
    assert written.name.startswith("symphony-events-") and written.suffix == ".txt"
    assert len(written.read_text().splitlines()) == len(tools_port.events)


async def test_export_a_transcript_as_json_lines(tools_port, make_app, tmp_path):
    app = make_app(tools_port)
    target = tmp_path / "t.jsonl"
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2", "enter")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        await pilot.press(*str(target), "enter")
        await done(pilot)
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert rows and {r["issue_id"] for r in rows} == {"demo-1"}
    assert not any("project" in r for r in rows)  # one scheduler: no project field
    assert [r["seq"] for r in rows] == [e.seq for e in tools_port.events if e.issue_id == "demo-1"]


def test_export_text_is_inert(tools_port):
    event = tools_port.add_event(EventKind.MESSAGE, "hi \x1b]52;c;AAAA\x07there\nnext")
    text = export_lines([event], Path("x.txt"))
    assert "\x1b" not in text and "\x07" not in text and text.count("\n") == 1


async def test_run_in_terminal_runs_the_program_and_reports_its_exit(tmp_path):
    from contextlib import contextmanager

    entered: list[bool] = []

    @contextmanager
    def suspend():
        entered.append(True)
        yield

    ok, message = await run_in_terminal(["sh", "-c", "pwd > out; exit 3"], str(tmp_path), suspend)
    assert entered and not ok and message == "sh exited with 3"
    assert (tmp_path / "out").read_text().strip() == str(tmp_path)
    ok, message = await run_in_terminal(["/no/such/program"], str(tmp_path), suspend)
    assert not ok and "cannot start" in message


async def test_a_workspace_on_a_worker_host_offers_the_ssh_command(tools_port, make_app):
    from symphony_tui.scheduler.workspace_view import diff_of

    recovered = tools_port.current.recovered[0].model_copy(update={"host": "build-1"})
    tools_port.update(recovered=(recovered, *tools_port.current.recovered[1:]))
    found = await diff_of(tools_port.current, "DEMO-9")
    assert found.error and "worker host build-1" in found.error and not found.files
    app = make_app(tools_port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, Choose)
        assert "on worker host build-1" in str(dialog._body)
        commands = [d for label, d in dialog._choices if label == "Copy a shell command"]
        assert commands == ["ssh -t build-1 'cd /ws/DEMO-9 && exec $SHELL'"]


async def palette_titles(pilot, query: str) -> list[str]:
    """The titles the command palette offers for ``query``."""
    from textual.command import CommandList

    await pilot.press("ctrl+p")
    await settle(pilot)
    await pilot.press(*query)
    for _ in range(20):  # the palette searches in a worker of its own
        await pilot.pause(0.05)
        options = pilot.app.screen.query_one(CommandList)
        if options.option_count:
            break
    titles = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
    return [t.splitlines()[0] for t in titles]


async def test_the_palette_offers_one_quit(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = await palette_titles(pilot, "quit")
        assert [t for t in titles if t.startswith("Quit")] == ["Quit (q)"]


async def test_palette_screenshot_saves_in_the_state_folder_and_says_where(
    port, make_app, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # not made yet
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "Screenshot" in await palette_titles(pilot, "screenshot")
        await pilot.press("enter")
        await pilot.pause(0.3)
        folder = tmp_path / "state" / "symphony-tui" / "screenshots"
        saved = list(folder.glob("symphony-*.svg"))
        assert len(saved) == 1 and saved[0].read_text().startswith("<svg")
        assert (f"screenshot saved: {saved[0]}", "information") in notifications(app)


async def test_a_screenshot_that_cannot_be_saved_says_why(port, make_app, tmp_path, monkeypatch):
    (tmp_path / "state").write_text("a file where the state folder would be")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await palette_titles(pilot, "screenshot")
        await pilot.press("enter")
        await pilot.pause(0.3)
        [(message, severity)] = notifications(app)
        assert severity == "error" and message.startswith("screenshot not saved: ")
        assert str(tmp_path / "state") in message and "Not a directory" in message
