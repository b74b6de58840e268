"""Every operator key against the fake port: the right command, confirmations, and
``check_action`` disabling what does not apply."""

from __future__ import annotations

from textual.widgets import Input, OptionList

from symphony_tui.console.screens.help import HelpScreen
from symphony_tui.console.screens.modals import AskText, Choose, Confirm
from symphony_tui.console.widgets.issues import IssuesTable
from symphony_tui.console.widgets.workers import WorkersTable
from symphony_tui.domain import (
    Answer,
    ApprovalKind,
    ApprovalRequest,
    Approve,
    Deny,
    Interrupt,
    MoveIssue,
    PauseDispatch,
    Question,
    QuestionOption,
    Refresh,
    Rerun,
    Stop,
)
from symphony_tui.scheduler.port import CommandResult
from tests.console.helpers import SIZE, done, notifications, settle


async def select_worker(pilot, identifier: str) -> None:
    await pilot.press("2")
    table = pilot.app.screen.query_one(WorkersTable)
    key = next(r.issue_id for r in pilot.app.snapshot.running if r.issue_identifier == identifier)
    assert table.select_key(key)
    await pilot.pause()


async def select_issue(pilot, identifier: str) -> None:
    await pilot.press("1")
    table = pilot.app.screen.query_one(IssuesTable)
    key = next(i.issue_id for i in pilot.app.snapshot.issues if i.identifier == identifier)
    assert table.select_key(key)
    await pilot.pause()


async def test_interrupt_asks_first_then_sends(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("i")
        assert isinstance(app.screen, Confirm)
        assert port.sent == []
        await pilot.press("y")
        await done(pilot)
        assert port.sent == [Interrupt(issue_id="demo-3")]
        assert ("interrupt accepted", "information") in notifications(app)


async def test_interrupt_cancelled_sends_nothing(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("i")
        assert isinstance(app.screen, Confirm)
        await pilot.press("n")
        await done(pilot)
        assert not isinstance(app.screen, Confirm)
        assert port.sent == []


async def test_interrupt_dialog_closes_when_its_worker_ends_first(port, make_app):
    # the question lapses: answering "yes" later would only fail, so nothing is offered
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("i")
        assert isinstance(app.screen, Confirm)
        port.current = port.current.model_copy(
            update={"running": [r for r in port.current.running if r.issue_id != "demo-3"]}
        )
        app.tick()
        await done(pilot)
        assert not isinstance(app.screen, Confirm)
        await pilot.press("y")
        await done(pilot)
        assert port.sent == []
        assert any("ended before you answered" in text for text, _ in notifications(app))


async def test_stop_asks_first(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("s")
        assert isinstance(app.screen, Confirm)
        await pilot.press("y")
        await done(pilot)
        assert port.sent == [Stop(issue_id="demo-1")]


def footer_actions(app) -> set[str]:
    """The actions the footer offers now (Textual drops the ones check_action hides)."""
    return {a.binding.action for a in app.active_bindings.values() if a.binding.show}


async def test_footer_offers_only_what_applies_to_the_selected_row(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")  # running, with a pending approval
        assert {"interrupt", "stop", "approve", "deny"} <= footer_actions(app)
        await select_issue(pilot, "DEMO-5")  # idle: nothing runs, nothing asks
        offered = footer_actions(app)
        assert not {"interrupt", "stop", "approve", "deny"} & offered
        assert "filter_log" in offered and "quit" in offered


async def test_interrupt_and_stop_disabled_without_running_worker(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_issue(pilot, "DEMO-2")  # retry-queued, not running
        assert app.check_action("interrupt", ()) is False
        assert app.check_action("stop", ()) is False
        await pilot.press("i", "s")
        await done(pilot)
        assert not isinstance(app.screen, Confirm)
        assert port.sent == []


async def test_approve_once_for_session_and_deny(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("a", "A", "d")
        await done(pilot)
        assert port.sent == [
            Approve(approval_id="demo-1:7"),
            Approve(approval_id="demo-1:7", for_session=True),
            Deny(approval_id="demo-1:7"),
        ]


async def test_oldest_pending_approval_of_worker_is_answered(port, make_app):
    from tests.console.sample import COMMAND_APPROVAL, ago

    newer = COMMAND_APPROVAL.model_copy(update={"id": "demo-1:9", "created_at": ago(5)})
    port.update(approvals=(newer, *port.current.approvals))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("a")
        await done(pilot)
        assert port.sent == [Approve(approval_id="demo-1:7")]


async def test_deny_with_message(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("D")
        assert isinstance(app.screen, AskText)
        await pilot.press(*"no network")
        await pilot.press("enter")
        await done(pilot)
        assert port.sent == [Deny(approval_id="demo-1:7", message="no network")]


async def test_approve_keys_disabled_without_pending_approval(port, make_app):
    port.update(approvals=())
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        for action in ("approve", "approve_session", "deny", "deny_message", "answer"):
            assert app.check_action(action, ()) is False
        await pilot.press("a", "A", "d", "D", "t")
        await done(pilot)
        assert port.sent == []
        footer_actions = {b.binding.action for b in app.screen.active_bindings.values()}
        assert "approve" not in footer_actions  # hidden from the footer
        assert "interrupt" in footer_actions


async def test_an_answer_key_on_a_row_without_a_request_says_where_they_wait(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_issue(pilot, "DEMO-2")  # nothing pending here; DEMO-1 and DEMO-3 wait
        await pilot.press("a")
        await done(pilot)
        assert port.sent == []
        (hint,) = [m for m, severity in notifications(app) if severity == "warning"]
        assert "DEMO-2 has nothing waiting for you" in hint
        assert "DEMO-1" in hint and "DEMO-3" in hint and "v opens the approvals" in hint


async def test_question_is_answered_with_a_choice_not_approved(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        assert app.check_action("approve", ()) is False
        assert app.check_action("answer", ()) is True
        await pilot.press("a")
        await pilot.pause()
        assert port.sent == []
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, Choose)
        await pilot.press("down", "enter")
        await done(pilot)
        assert port.sent == [Answer(approval_id="demo-3:2", answers={"db": ("postgres",)})]


async def test_question_answered_with_typed_text(port, make_app):
    from tests.console.sample import QUESTION_APPROVAL

    free = QUESTION_APPROVAL.model_copy(
        update={"questions": (QUESTION_APPROVAL.questions[0].model_copy(update={"options": ()}),)}
    )
    port.update(approvals=(free,))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, AskText)
        await pilot.press(*"redis", "enter")
        await done(pilot)
        assert port.sent == [Answer(approval_id="demo-3:2", answers={"db": ("redis",)})]


async def test_rerun_refresh_pause_resume(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_issue(pilot, "DEMO-2")
        await pilot.press("r", "R", "p")
        await done(pilot)
        port.update(dispatch_paused=True)
        await settle(pilot)
        await pilot.press("p")
        await done(pilot)
        assert port.sent == [
            Rerun(issue_id="demo-2"),
            Refresh(),
            PauseDispatch(paused=True),
            PauseDispatch(paused=False),
        ]


async def test_rerun_disabled_for_running_issue(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        assert app.check_action("rerun", ()) is False
        await pilot.press("r")
        await done(pilot)
        assert port.sent == []


async def test_move_offers_the_configured_states(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_issue(pilot, "DEMO-5")  # in Todo
        await pilot.press("m")
        assert isinstance(app.screen, Choose)
        options = app.screen.query_one(OptionList)
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert labels == ["Todo  current", "In Progress", "Done", "Cancelled"]
        await pilot.press("down", "down", "enter")
        await done(pilot)
        # any other state can be typed; one outside the workflow's states asks first
        await pilot.press("m", "tab", *"Review", "enter")
        await done(pilot)
        assert isinstance(app.screen, Confirm)
        assert "not one of this workflow" in str(app.screen.query_one("#dialog-body").render())
        await pilot.press("y")
        await done(pilot)
        await pilot.press("m", "tab", *"Reveiw", "enter", "escape")  # a typo, thought better of
        await done(pilot)
        await pilot.press("m", "tab", *"done", "enter")  # a known state, in its own spelling
        await done(pilot)
        # the current state is not a move
        await pilot.press("m", "enter")
        await done(pilot)
        assert port.sent == [
            MoveIssue(issue_id="demo-5", state="Done"),
            MoveIssue(issue_id="demo-5", state="Review"),
            MoveIssue(issue_id="demo-5", state="Done"),
        ]
        assert ("DEMO-5 is already in Todo", "information") in notifications(app)


async def test_move_without_configured_states_asks_for_text(port, make_app):
    port.update(tracker_states=())  # a scheduler that does not report them
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_issue(pilot, "DEMO-5")
        await pilot.press("m")
        assert isinstance(app.screen, AskText)
        await pilot.press(*"Done", "enter")
        await done(pilot)
        assert port.sent == [MoveIssue(issue_id="demo-5", state="Done")]


async def test_move_cancelled_with_escape(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_issue(pilot, "DEMO-5")
        await pilot.press("m", "escape")
        await done(pilot)
        assert port.sent == []
        assert not isinstance(app.screen, (AskText, Choose))


async def test_failed_result_and_raising_port_become_notifications(port, make_app):
    def reply(command):
        if command.type == "refresh":
            raise RuntimeError("tracker down\x1b[31m")
        return CommandResult(False, "no such issue [bold]x[/bold]")

    port.reply = reply
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_issue(pilot, "DEMO-2")
        await pilot.press("r", "R")
        await done(pilot)
        notes = notifications(app)
        assert ("no such issue [bold]x[/bold]", "error") in notes
        assert any("tracker down" in m and s == "error" and "\x1b" not in m for m, s in notes)
        assert app.is_running


async def test_help_lists_every_command_and_closes(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_console_keys_do_nothing_behind_an_open_dialog(port, make_app):
    """Help and the questions are modal: a console key pressed while one is open neither
    acts on the row behind it nor says why it cannot."""
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")  # a worker waiting for an approval
        await pilot.press("question_mark")
        await pilot.press("a", "A", "i", "s", "p")
        await done(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert port.sent == [] and notifications(app) == [], notifications(app)
        await pilot.press("escape")
        await pilot.press("i")  # a question: its own keys only
        assert isinstance(app.screen, Confirm)
        await pilot.press("a", "p")
        await done(pilot)
        assert isinstance(app.screen, Confirm) and port.sent == []
        await pilot.press("n")
        await pilot.press("a")  # with nothing open the key acts again
        await done(pilot)
        assert port.sent == [Approve(approval_id="demo-1:7")]


async def test_help_is_built_once_and_follows_the_theme(port, make_app):
    """The help screen is kept between openings; a theme chosen while it is closed still
    colours it when it opens again."""
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        first = app.screen
        assert isinstance(first, HelpScreen)
        await pilot.press("escape")
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        await pilot.press("question_mark")
        assert app.screen is first
        box = first.query_one("#help")
        box.scroll_end(animate=False)
        await pilot.pause()
        assert box.scroll_y > 0  # the test needs a help taller than the screen
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        assert app.screen is first and box.scroll_y == 0  # each opening starts at the top
        primary = app.theme_variables["primary"]
        assert box.styles.border_top[1].hex.lower() == primary.lower()
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_help_renders_its_table_once_per_width(port, make_app, monkeypatch):
    """Help renders its key table once when it first opens (a ``Static`` rendered it four
    times, measuring and drawing at two widths), never again at the same size, and once
    more at a new width."""
    from rich.table import Table

    renders: list[int] = []
    rich_console = Table.__rich_console__

    def counted(self, console, options):
        renders.append(options.max_width)
        return rich_console(self, console, options)

    monkeypatch.setattr(Table, "__rich_console__", counted)
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        first = len(renders)
        assert first == 1
        for _ in range(2):
            await pilot.press("escape", "question_mark")
            await pilot.pause()
        assert len(renders) == first
        await pilot.resize_terminal(80, SIZE[1])  # the help box is 95 % of it
        await pilot.pause()
        assert len(renders) == first + 1 and renders[-1] < renders[0]


async def test_focus_keys_and_tab(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key, wid in (("1", "issues"), ("2", "workers"), ("3", "log"), ("4", "tokens")):
            await pilot.press(key)
            assert app.focused is not None and app.focused.id == wid
        await pilot.press("1", "tab")
        assert app.focused.id == "workers"


async def test_keymap_file_remaps_binding(port, make_app, tmp_path):
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('interrupt = "x"\n')
    app = make_app(port, keymap_path=keymap)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("i")
        await pilot.pause()
        assert not isinstance(app.screen, Confirm)
        await pilot.press("x")
        assert isinstance(app.screen, Confirm)
        await pilot.press("y")
        await done(pilot)
        assert port.sent == [Interrupt(issue_id="demo-1")]


async def test_bad_keymap_is_a_notification(port, make_app, tmp_path):
    keymap = tmp_path / "keymap.toml"
    keymap.write_text("[[[")
    app = make_app(port, keymap_path=keymap)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert any("keymap" in m and s == "warning" for m, s in notifications(app))


async def test_palette_offers_only_applicable_commands(port, make_app):
    from symphony_tui.console.palette import ConsoleCommands

    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        provider = ConsoleCommands(app.screen)
        titles = [h.text for h in [hit async for hit in provider.discover()]]
        assert any(t.startswith("Approve (a)") for t in titles)
        assert not any(t.startswith("Answer") for t in titles)
        assert any(t.startswith("Filter") for t in titles)
        await select_worker(pilot, "DEMO-3")
        titles = [h.text for h in [hit async for hit in provider.discover()]]
        assert any(t.startswith("Answer (t)") for t in titles)
        assert not any(t.startswith("Approve (a)") for t in titles)


async def test_confirmations_are_brief_and_failures_stay(port, make_app):
    def reply(command):
        if command.type == "refresh":
            return CommandResult(False, "tracker down")
        return CommandResult(True, "rerun queued for DEMO-2")

    port.reply = reply
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_issue(pilot, "DEMO-2")
        await pilot.press("r", "R")
        await done(pilot)
        shown = {n.message: n for n in app._notifications}
        ok, failed = shown["rerun queued for DEMO-2"], shown["tracker down"]
        assert ok.title == "" and ok.timeout <= 3  # one line, gone quickly
        assert failed.title == "refresh" and failed.timeout >= 2 * ok.timeout


async def test_workflow_notices_are_shown_when_the_console_opens(port, make_app):
    app = make_app(port, notices=("unknown setting agnet.max_turns is ignored",))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert ("unknown setting agnet.max_turns is ignored", "warning") in notifications(app)


ACP_PERMISSION = ApprovalRequest(
    id="demo-1:acp-1",
    issue_id="demo-1",
    issue_identifier="DEMO-1",
    backend="acp",
    kind=ApprovalKind.COMMAND,
    summary="run: make",
    command="make",
    questions=(
        Question(
            id="option",
            header="permission",
            question="make: choose one of the agent's options",
            options=(
                QuestionOption(label="Allow", description="allow_once", id="ok-1"),
                QuestionOption(label="Reject", description="reject_once", id="no-1"),
                QuestionOption(label="Reject", description="reject_always", id="no-2"),
            ),
            free_text=False,
        ),
    ),
)


async def test_an_agents_permission_offers_no_free_text(port, make_app):
    port.update(approvals=(ACP_PERMISSION,))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, Choose)
        assert not app.screen.query(Input)  # a choice-only question: the options alone
        await pilot.press("escape")
        await done(pilot)
        assert port.sent == []


async def test_an_agents_option_is_answered_by_its_id_when_names_repeat(port, make_app):
    port.update(approvals=(ACP_PERMISSION,))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, Choose)
        await pilot.press("down", "down", "enter")  # the second "Reject"
        await done(pilot)
        assert port.sent == [Answer(approval_id="demo-1:acp-1", answers={"option": ("no-2",)})]


def _help_lines(key_for) -> list[str]:
    """The help table as the screen shows it, one line a row of text (trailing spaces cut)."""
    from rich.console import Console

    from symphony_tui.console.screens.help import help_table

    console = Console(width=100, record=True, color_system=None)
    console.print(help_table(key_for))
    return [line.rstrip() for line in console.export_text().splitlines()]


def _section(lines: list[str], title: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.strip() == title) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:end]


async def test_help_lists_a_key_shared_by_two_commands_of_a_screen_once(port, make_app, tmp_path):
    """Drain and undrain share ``d`` (which applies follows the selected host), as re-attach
    and rerun share ``r``: one row each, both helps on it; a remap parts them."""
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        hosts = _section(_help_lines(app.key_for), "Worker hosts")
        recovered = _section(_help_lines(app.key_for), "Recovered workspaces")
    assert [line.split()[0] for line in hosts if line[:9].strip()] == ["esc", "d", "P"]
    drain = next(i for i, line in enumerate(hosts) if line.lstrip().startswith("d "))
    assert "Drain the selected host" in hosts[drain]
    assert any("or undrain the selected host" in line for line in hosts[drain + 1 :])
    assert [line.split()[0] for line in recovered if line[:9].strip()] == ["esc", "r", "x", "y"]
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('undrain_host = "u"\n')
    app = make_app(port, keymap_path=keymap)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        hosts = _section(_help_lines(app.key_for), "Worker hosts")
    keys = [line.split()[0] for line in hosts if line[:9].strip()]
    assert keys == ["esc", "d", "u", "P"]
    assert not any(line.lstrip().startswith("or ") for line in hosts)
