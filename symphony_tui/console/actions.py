"""The operator's actions that send commands: :class:`CommandSender` (send, confirm then
send, audit notes), :class:`IssueActions` on the selected issue or worker (interrupt,
stop, message the agent, extend its token budget, rerun, move; the dispatch-wide refresh
and pause) and :class:`ApprovalActions` on the selected approval request (approve, deny,
cancel the turn, grant permissions, answer questions; shapes: docs/protocols.md).

Each command goes out in a worker of group ``commands``; its :class:`CommandResult`
becomes a notification. The app hands each action what is selected (``None``: nothing);
screens ask through ``console.messages`` (``SendCommand``, ``ConfirmCommand``), which the
app hands to the same :class:`CommandSender`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from rich.text import Text

from symphony_tui import domain
from symphony_tui.console.approval_text import asked, permission_choices
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.screens.modals import AskText, Choose, Confirm
from symphony_tui.domain import ApprovalDecision

if TYPE_CHECKING:
    from symphony_tui.console.state import ConsoleState
    from symphony_tui.console.ui import Ui
    from symphony_tui.domain import ApprovalRequest
    from symphony_tui.domain.commands import Command
    from symphony_tui.scheduler.port import CommandResult

BUDGET_STEPS = ("50k", "200k", "1M")
MONEY_STEPS = ("$1", "$5", "$20")
STOP_CHOICE = "stop the run"


def parse_usd(text: str) -> float | None:
    """A positive amount of US dollars from ``"$5"``, ``"2.50"``, ``"$1,000"``; None
    otherwise (at most 1,000,000, as the command takes)."""
    raw = text.strip().removeprefix("$").replace(",", "").strip()
    try:
        amount = float(raw)
    except ValueError:
        return None
    return amount if 0 < amount <= 1_000_000 else None


def parse_tokens(text: str) -> int | None:
    """A positive token count from ``"300k"``, ``"1.5M"``, ``"250,000"``; None otherwise."""
    raw = text.strip().lower().replace(",", "").replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(raw[-1:], 1)
    if scale != 1:
        raw = raw[:-1]
    try:
        tokens = int(float(raw) * scale)
    except (ValueError, OverflowError):
        return None
    return tokens if 0 < tokens <= 1_000_000_000 else None


class CommandSender:
    """Sends commands through ``state.port``; dialogs and notifications go through ``ui``."""

    def __init__(self, state: ConsoleState, ui: Ui) -> None:
        self._state = state
        self._ui = ui

    def send(self, command: Command) -> None:
        """Send ``command`` in a worker; its result becomes a notification."""
        self._ui.run_worker(self._send(command), group="commands", exit_on_error=False)

    async def _send(self, command: Command) -> CommandResult:
        result = await self._state.port.send(command)
        message = (
            one_line(result.message, 300) or f"{command.type}: {'ok' if result.ok else 'failed'}"
        )
        # a confirmation is one line ("accept sent for DEMO-3"); a failure names its command
        self._ui.notify(
            message,
            title="" if result.ok else command.type.replace("_", " "),
            severity="information" if result.ok else "error",
            markup=False,
        )
        return result

    def confirm_then(
        self,
        title: str,
        body: Text,
        command: Command,
        yes: str,
        *,
        no: str = "Cancel",
        running: str | None = None,
    ) -> None:
        """Ask (``Confirm``), then send ``command`` if the operator says yes. With
        ``running`` (an issue id) the question is about that issue's worker: the dialog
        closes by itself, sending nothing, once the worker has ended; and in a fleet whose
        project of it is stale it is not asked at all (the command could not be sent)."""
        stale = self._state.stale_project(running) if running is not None else None
        if stale is not None:
            self._ui.notify(
                stale,
                title=command.type.replace("_", " "),
                severity="error",
                markup=False,
            )
            return

        def decided(ok: bool | None) -> None:
            if ok:
                self.send(command)

        still_valid = None
        gone = ""
        if running is not None:
            still_valid = lambda snap: any(r.issue_id == running for r in snap.running)  # noqa: E731
            gone = f"{self._state.ident(running)} ended before you answered; nothing was sent"
        self._ui.push_screen(
            Confirm(title, body, yes=yes, no=no, still_valid=still_valid, gone=gone), decided
        )

    def note(self, what: str, **fields: object) -> None:
        """Record an operator action in the scheduler's audit log (``port.note_action``),
        in a worker; a failure to record never breaks the action."""

        async def note() -> None:
            with contextlib.suppress(Exception):
                await self._state.port.note_action(what, **fields)

        self._ui.run_worker(note(), group="audit-notes", exit_on_error=False)


class IssueActions:
    """Commands on one issue (``issue``: an issue id, ``None`` when nothing is selected),
    read from ``state``, sent through ``sender``, asked through ``ui``'s dialogs."""

    def __init__(self, state: ConsoleState, ui: Ui, sender: CommandSender) -> None:
        self._state = state
        self._ui = ui
        self._sender = sender

    def interrupt(self, issue: str | None) -> None:
        if issue is None or issue not in self._state.running_ids():
            return
        body = Text("Interrupt the running turn of ", end="")
        body.append_text(inert(self._state.ident(issue), "bold"))
        body.append("? The run ends as cancelled and the issue is held until you rerun it.")
        self._sender.confirm_then(
            "Interrupt worker", body, domain.Interrupt(issue_id=issue), "Interrupt", running=issue
        )

    def stop(self, issue: str | None) -> None:
        if issue is None or issue not in self._state.running_ids():
            return
        body = Text("Stop the worker of ", end="")
        body.append_text(inert(self._state.ident(issue), "bold"))
        body.append("? Its workspace is kept and the issue held until you rerun it.")
        self._sender.confirm_then(
            "Stop worker", body, domain.Stop(issue_id=issue), "Stop", running=issue
        )

    def steer(self, issue: str | None) -> None:
        """Ask for a message and send it to the worker's agent (``Steer``): into the
        running turn, or with the next one; the result is a notification."""
        if issue is None or issue not in self._state.running_ids():
            return
        body = Text("Message for the agent of ", end="")
        body.append_text(inert(self._state.ident(issue), "bold"))
        body.append(" (it reads it before its next step):")

        def entered(text: str | None) -> None:
            if not text or not text.strip():
                return
            from pydantic import ValidationError

            try:
                command = domain.Steer(issue_id=issue, text=text)
            except ValidationError as exc:  # too long: say so, send nothing, keep running
                reason = exc.errors()[0].get("msg", "not a valid message")
                self._ui.notify(
                    f"message not sent ({len(text):,} characters): {reason}",
                    title="steer",
                    severity="error",
                    markup=False,
                )
                return
            self._sender.send(command)

        self._ui.push_screen(AskText("Message the agent", body, placeholder="message"), entered)

    def budget(self, issue: str | None) -> None:
        """A run held by its token budget: extend it by a chosen amount (a choice, or a
        typed number such as ``300k``), or stop it (``Interrupt``: the issue is held)."""
        row = self._state.running_row(issue)
        if issue is None or row is None or not row.budget_reached:
            return
        money = row.budget_reached.startswith("$")  # "$2.31 of $2.00 per issue"
        body = Text("", end="")
        body.append_text(inert(row.issue_identifier, "bold"))
        body.append(f" reached its {'money' if money else 'token'} budget: ")
        body.append_text(inert(row.budget_reached, limit=80))
        choices = [(f"extend by {n}", None) for n in (MONEY_STEPS if money else BUDGET_STEPS)]
        choices.append((STOP_CHOICE, "the issue is held until you rerun it"))

        def chosen(answer: str | None) -> None:
            if not answer:
                return
            if answer == STOP_CHOICE:
                self._sender.send(domain.Interrupt(issue_id=issue))
                return
            amount = answer.removeprefix("extend by ")
            if money or amount.strip().startswith("$"):
                dollars = parse_usd(amount)
                if dollars is None:
                    self._ui.notify(
                        f"not an amount of dollars: {one_line(answer, 40)}",
                        title="budget",
                        severity="error",
                        markup=False,
                    )
                    return
                self._sender.send(domain.ExtendBudget(issue_id=issue, usd=dollars))
                return
            tokens = parse_tokens(amount)
            if tokens is None:
                self._ui.notify(
                    f"not a number of tokens: {one_line(answer, 40)}",
                    title="budget",
                    severity="error",
                    markup=False,
                )
                return
            self._sender.send(domain.ExtendBudget(issue_id=issue, tokens=tokens))

        self._ui.push_screen(
            Choose(
                "Money budget" if money else "Token budget",
                body,
                choices,
                allow_text=True,
                text_placeholder="or type $10" if money else "or type 300k",
            ),
            chosen,
        )

    def rerun(self, issue: str | None) -> None:
        if issue is not None:
            self._sender.send(domain.Rerun(issue_id=issue))

    def move(self, issue: str | None) -> None:
        """Offer the workflow's states (``Snapshot.tracker_states``: active, then terminal)
        as a list, with free text for any other state the tracker knows. A scheduler
        that does not report them (an older one behind ``attach``) gets a text box that
        suggests the states its issues are in."""
        snapshot = self._state.snapshot
        if issue is None or snapshot is None:
            return
        ident = self._state.ident
        current = next((i.state for i in snapshot.issues if i.issue_id == issue), None)
        body = Text("Move ", end="")
        body.append_text(inert(ident(issue), "bold"))
        if current:
            body.append(" (now ")
            body.append_text(inert(current, limit=40))
            body.append(")")
        body.append(" to tracker state:")

        known = {s.casefold(): s for s in snapshot.tracker_states}

        def entered(state: str | None) -> None:
            if not state:
                return
            if state.casefold() in known:
                state = known[state.casefold()]  # the tracker's spelling: "todo" -> "Todo"
            if state == current:
                self._ui.notify(f"{ident(issue)} is already in {one_line(state, 40)}")
                return
            move = domain.MoveIssue(issue_id=issue, state=state)
            if not known or state in known.values():
                self._sender.send(move)
                return
            # A typo, or a state outside the workflow: the scheduler would stop tracking
            # the issue and it would leave this list, with no row left to move it back.
            warning = Text("", end="")
            warning.append_text(inert(state, "bold", limit=40))
            warning.append(" is not one of this workflow's active or terminal states. ")
            warning.append_text(inert(ident(issue), "bold"))
            warning.append(" will leave the scheduler's issue list (the tracker keeps it).")
            self._sender.confirm_then("Move issue", warning, move, "Move anyway")

        if snapshot.tracker_states:
            choices = [
                (state, "current" if state == current else None)
                for state in dict.fromkeys(snapshot.tracker_states)
            ]
            dialog = Choose(
                "Move issue", body, choices, allow_text=True, text_placeholder="or type a state"
            )
            self._ui.push_screen(dialog, entered)
            return
        states = sorted({i.state for i in snapshot.issues})
        if states:
            body.append(f"\nknown: {one_line(', '.join(states), 200)}", style="dim")
        self._ui.push_screen(
            AskText("Move issue", body, placeholder="state", suggestions=states), entered
        )

    def refresh(self, project: str | None = None) -> None:
        """Poll now; in a fleet console, ``project``'s scheduler (see :meth:`no_project`)."""
        if not self.no_project(project):
            self._sender.send(domain.Refresh(project=project))

    def toggle_pause(self, project: str | None = None) -> None:
        """Pause or resume dispatching (the scheduler's own pause state decides which).

        In a fleet console it names the project before anything is sent: ``project``
        (what the focused selection names), else the project filter's, is asked by name
        (``Pause dispatch of web?``); with neither, the operator picks the project from
        the fleet's list."""
        from symphony_tui.console.fleet import is_fleet, project_row

        fleet = self._state.fleet_snapshot
        if not is_fleet(fleet):
            snapshot = self._state.snapshot
            paused = bool(snapshot and snapshot.dispatch_paused)
            self._sender.send(domain.PauseDispatch(paused=not paused))
            return
        row = project_row(fleet, project or self._state.project_filter)
        if row is None:
            self._choose_pause()
            return
        resume = row.dispatch_paused
        verb = "Resume" if resume else "Pause"
        body = Text(f"{verb} dispatch of ", end="")
        body.append_text(inert(row.name, "bold", limit=60))
        body.append("? ")
        body.append(
            "Its scheduler dispatches new work again."
            if resume
            else "Its running work goes on; it starts no new work until you resume it."
        )
        command = domain.PauseDispatch(paused=not resume, project=row.name)
        self._sender.confirm_then(f"{verb} dispatch", body, command, verb)

    def _choose_pause(self) -> None:
        """A fleet's ``p`` with no project selected or filtered: pick one (its pause state
        beside it); the pick is sent, by its pause state when answered."""
        from symphony_tui.console.fleet import project_row

        fleet = self._state.fleet_snapshot
        if fleet is None:
            return
        # the live ones first (the others refuse it), a duplicate row not at all (its
        # scheduler is another row's)
        projects = sorted(
            (p for p in fleet.projects if p.link_state != "duplicate"),
            key=lambda p: p.link_state != "live",
        )
        names = [p.name for p in projects]
        choices: list[tuple[str, str | None]] = []
        for p in projects:
            what = "paused: resume its dispatch" if p.dispatch_paused else "pause its dispatch"
            if p.link_state != "live":
                what += f" ({p.link_state})"
            choices.append((one_line(p.name, 60), what))
        body = Text("No project is selected where the focus is. Pause or resume which?")

        def chosen(name: str | None) -> None:
            row = project_row(self._state.fleet_snapshot, name)
            if row is not None:
                command = domain.PauseDispatch(paused=not row.dispatch_paused, project=row.name)
                self._sender.send(command)

        title = "Pause or resume dispatch"
        self._ui.push_screen(Choose(title, body, choices, values=names), chosen)

    def no_project(self, project: str | None) -> bool:
        """A fleet console with no project for a command that names no issue (nothing
        selected, no filter): says so in one line, and nothing is sent."""
        from symphony_tui.console.fleet import CHOOSE_A_PROJECT, is_fleet

        if project is None and is_fleet(self._state.fleet_snapshot):
            self._ui.notify(CHOOSE_A_PROJECT, severity="warning", markup=False)
            return True
        return False


class ApprovalActions:
    """Answers sent through ``sender``; the dialogs (a choice, a message, the questions one
    after another) shown through ``ui``, those that ask several in a row in a worker of
    group ``dialogs`` (a new one replaces one still asking)."""

    def __init__(self, ui: Ui, sender: CommandSender) -> None:
        self._ui = ui
        self._sender = sender

    def approve(self, approval: ApprovalRequest | None) -> None:
        if approval is not None:
            self._sender.send(domain.Approve(approval_id=approval.id))

    def approve_session(self, approval: ApprovalRequest | None) -> None:
        if approval is not None:
            self._sender.send(domain.Approve(approval_id=approval.id, for_session=True))

    def deny(self, approval: ApprovalRequest | None) -> None:
        if approval is not None:
            self._sender.send(domain.Deny(approval_id=approval.id))

    def cancel_turn(self, approval: ApprovalRequest | None) -> None:
        if approval is None or ApprovalDecision.CANCEL not in approval.available:
            return
        body = Text("Deny ", end="")
        body.append_text(
            inert(approval.summary or approval.command or approval.kind.value, "bold", limit=80)
        )
        body.append(" and end the turn of ")
        body.append_text(inert(approval.issue_identifier or approval.issue_id, "bold"))
        body.append("? The agent stops working on this turn.")
        command = domain.Deny(approval_id=approval.id, cancel=True)
        self._sender.confirm_then(
            "Cancel turn", body, command, "Deny and end turn", no="Keep the turn"
        )

    def grant(self, approval: ApprovalRequest | None) -> None:
        """Grant one part of a permissions request (or all of it), then pick the scope."""
        parts = permission_choices(approval) if approval is not None else []
        if approval is None or not parts:
            return
        self._ui.run_worker(
            self._grant(approval, parts), group="dialogs", exclusive=True, exit_on_error=False
        )

    async def _grant(self, approval: ApprovalRequest, parts: list[tuple[str, dict]]) -> None:
        everything = "everything asked"
        body = Text("Grant which part of ", end="")
        body.append_text(inert(asked(approval, 60), "bold"))
        body.append("?")
        choices = [(label, None) for label, _ in parts] + [(everything, None)]
        picked = await self._ui.push_screen_wait(Choose("Grant permissions", body, choices))
        if picked is None:
            return
        scopes = [("this turn", None), ("the rest of the session", None)]
        scope = await self._ui.push_screen_wait(Choose("For how long", Text(picked), scopes))
        if scope is None:
            return
        grant = dict(parts).get(picked)  # None: everything asked
        self._sender.send(
            domain.Approve(
                approval_id=approval.id, for_session=scope != "this turn", permissions=grant
            )
        )

    def deny_message(self, approval: ApprovalRequest | None) -> None:
        if approval is None:
            return
        body = Text("Deny ", end="")
        body.append_text(
            inert(approval.summary or approval.command or approval.kind.value, limit=80)
        )
        body.append("\nwith this message to the agent:")

        def entered(message: str | None) -> None:
            if message is not None:
                self._sender.send(domain.Deny(approval_id=approval.id, message=message))

        self._ui.push_screen(AskText("Deny with a message", body, placeholder="reason"), entered)

    def answer(self, approval: ApprovalRequest | None) -> None:
        if approval is not None and approval.questions:
            self._ui.run_worker(
                self._ask_questions(approval), group="dialogs", exclusive=True, exit_on_error=False
            )

    async def _ask_questions(self, approval: ApprovalRequest) -> None:
        answers: dict[str, tuple[str, ...]] = {}
        for n, q in enumerate(approval.questions, 1):
            title = f"Question {n}/{len(approval.questions)}"
            body = inert(q.header, "bold") if q.header else Text("", end="")
            if q.question:
                if body.plain:
                    body.append("\n")
                body.append_text(inert(q.question, multiline=True))
            if q.options:
                choices = [(o.label, o.description) for o in q.options]
                values = [o.label if o.id is None else o.id for o in q.options]
                value = await self._ui.push_screen_wait(
                    Choose(title, body, choices, allow_text=q.free_text, values=values)
                )
            else:
                value = await self._ui.push_screen_wait(AskText(title, body, placeholder="answer"))
            if value is None:
                self._ui.notify("answer cancelled", severity="warning")
                return
            answers[q.id] = (value,)
        self._sender.send(domain.Answer(approval_id=approval.id, answers=answers))
