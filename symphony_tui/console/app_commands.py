"""Sending commands to the scheduler port, with confirmation where they are drastic.

Each command goes out in a worker of group ``commands``; its :class:`CommandResult`
becomes a notification. Screens ask through ``console.messages`` (``SendCommand``,
``ConfirmCommand``) instead of importing the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from symphony_tui import domain
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.screens.modals import AskText, Choose, Confirm

if TYPE_CHECKING:
    from symphony_tui.console.messages import ConfirmCommand, SendCommand
    from symphony_tui.domain.commands import Command
    from symphony_tui.scheduler.port import CommandResult

BUDGET_STEPS = ("50k", "200k", "1M")
STOP_CHOICE = "stop the run"


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


class CommandsMixin:
    """Send / confirm-then-send, and the issue and dispatch actions.

    A mixin of :class:`~symphony_tui.console.app.SymphonyApp` (it uses the App's API and
    the attributes set in ``SymphonyApp.__init__``); it never imports the app."""

    def send(self, command: Command) -> None:
        """Send ``command`` in a worker; its result becomes a notification."""
        self.run_worker(self._send(command), group="commands", exit_on_error=False)

    async def _send(self, command: Command) -> CommandResult:
        result = await self.port.send(command)
        message = (
            one_line(result.message, 300) or f"{command.type}: {'ok' if result.ok else 'failed'}"
        )
        # a confirmation is one line ("accept sent for DEMO-3"); a failure names its command
        self.notify(
            message,
            title="" if result.ok else command.type.replace("_", " "),
            severity="information" if result.ok else "error",
            markup=False,
        )
        return result

    def _ident(self, issue_id: str) -> str:
        if self._snapshot is not None:
            for r in self._snapshot.running:
                if r.issue_id == issue_id:
                    return r.issue_identifier
            for i in self._snapshot.issues:
                if i.issue_id == issue_id:
                    return i.identifier
        return issue_id

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
        closes by itself, sending nothing, once the worker has ended."""

        def decided(ok: bool | None) -> None:
            if ok:
                self.send(command)

        still_valid = None
        gone = ""
        if running is not None:
            still_valid = lambda snap: any(r.issue_id == running for r in snap.running)  # noqa: E731
            gone = f"{self._ident(running)} ended before you answered; nothing was sent"
        self.push_screen(
            Confirm(title, body, yes=yes, no=no, still_valid=still_valid, gone=gone), decided
        )

    def action_interrupt(self) -> None:
        issue = self._selected_issue()
        if issue is None or issue not in self._running_ids():
            return
        body = Text("Interrupt the running turn of ", end="")
        body.append_text(inert(self._ident(issue), "bold"))
        body.append("? The run ends as cancelled and the issue is held until you rerun it.")
        self.confirm_then(
            "Interrupt worker", body, domain.Interrupt(issue_id=issue), "Interrupt", running=issue
        )

    def action_stop(self) -> None:
        issue = self._selected_issue()
        if issue is None or issue not in self._running_ids():
            return
        body = Text("Stop the worker of ", end="")
        body.append_text(inert(self._ident(issue), "bold"))
        body.append("? Its workspace is kept and the issue held until you rerun it.")
        self.confirm_then("Stop worker", body, domain.Stop(issue_id=issue), "Stop", running=issue)

    def action_steer(self) -> None:
        """Ask for a message and send it to the selected worker's agent (``Steer``): into
        the running turn, or with the next one; the result is a notification."""
        issue = self._selected_issue()
        if issue is None or issue not in self._running_ids():
            return
        body = Text("Message for the agent of ", end="")
        body.append_text(inert(self._ident(issue), "bold"))
        body.append(" (it reads it before its next step):")

        def entered(text: str | None) -> None:
            if not text or not text.strip():
                return
            from pydantic import ValidationError

            try:
                command = domain.Steer(issue_id=issue, text=text)
            except ValidationError as exc:  # too long: say so, send nothing, keep running
                reason = exc.errors()[0].get("msg", "not a valid message")
                self.notify(
                    f"message not sent ({len(text):,} characters): {reason}",
                    title="steer",
                    severity="error",
                    markup=False,
                )
                return
            self.send(command)

        self.push_screen(AskText("Message the agent", body, placeholder="message"), entered)

    def action_budget(self) -> None:
        """A run held by its token budget: extend it by a chosen amount (a choice, or a
        typed number such as ``300k``), or stop it (``Interrupt``: the issue is held)."""
        issue = self._selected_issue()
        row = next(
            (r for r in (self._snapshot.running if self._snapshot else ()) if r.issue_id == issue),
            None,
        )
        if issue is None or row is None or not row.budget_reached:
            return
        body = Text("", end="")
        body.append_text(inert(row.issue_identifier, "bold"))
        body.append(" reached its token budget: ")
        body.append_text(inert(row.budget_reached, limit=80))
        choices = [(f"extend by {n}", None) for n in BUDGET_STEPS]
        choices.append((STOP_CHOICE, "the issue is held until you rerun it"))

        def chosen(answer: str | None) -> None:
            if not answer:
                return
            if answer == STOP_CHOICE:
                self.send(domain.Interrupt(issue_id=issue))
                return
            tokens = parse_tokens(answer.removeprefix("extend by "))
            if tokens is None:
                self.notify(
                    f"not a number of tokens: {one_line(answer, 40)}",
                    title="budget",
                    severity="error",
                    markup=False,
                )
                return
            self.send(domain.ExtendBudget(issue_id=issue, tokens=tokens))

        self.push_screen(
            Choose("Token budget", body, choices, allow_text=True, text_placeholder="or type 300k"),
            chosen,
        )

    def action_rerun(self) -> None:
        issue = self._selected_issue()
        if issue is not None:
            self.send(domain.Rerun(issue_id=issue))

    def action_move(self) -> None:
        """Offer the workflow's states (``Snapshot.tracker_states``: active, then terminal)
        as a list, with free text for any other state the tracker knows. A scheduler
        that does not report them (an older one behind ``attach``) gets a text box that
        suggests the states its issues are in."""
        issue = self._selected_issue()
        if issue is None or self._snapshot is None:
            return
        snapshot = self._snapshot
        current = next((i.state for i in snapshot.issues if i.issue_id == issue), None)
        body = Text("Move ", end="")
        body.append_text(inert(self._ident(issue), "bold"))
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
                self.notify(f"{self._ident(issue)} is already in {one_line(state, 40)}")
                return
            move = domain.MoveIssue(issue_id=issue, state=state)
            if not known or state in known.values():
                self.send(move)
                return
            # A typo, or a state outside the workflow: the scheduler would stop tracking
            # the issue and it would leave this list, with no row left to move it back.
            warning = Text("", end="")
            warning.append_text(inert(state, "bold", limit=40))
            warning.append(" is not one of this workflow's active or terminal states. ")
            warning.append_text(inert(self._ident(issue), "bold"))
            warning.append(" will leave the scheduler's issue list (the tracker keeps it).")
            self.confirm_then("Move issue", warning, move, "Move anyway")

        if snapshot.tracker_states:
            choices = [
                (state, "current" if state == current else None)
                for state in dict.fromkeys(snapshot.tracker_states)
            ]
            dialog = Choose(
                "Move issue", body, choices, allow_text=True, text_placeholder="or type a state"
            )
            self.push_screen(dialog, entered)
            return
        states = sorted({i.state for i in snapshot.issues})
        if states:
            body.append(f"\nknown: {one_line(', '.join(states), 200)}", style="dim")
        self.push_screen(
            AskText("Move issue", body, placeholder="state", suggestions=states), entered
        )

    def action_refresh(self) -> None:
        self.send(domain.Refresh())

    def action_toggle_pause(self) -> None:
        paused = bool(self._snapshot and self._snapshot.dispatch_paused)
        self.send(domain.PauseDispatch(paused=not paused))

    def on_send_command(self, message: SendCommand) -> None:
        self.send(message.command)

    def on_confirm_command(self, message: ConfirmCommand) -> None:
        self.confirm_then(message.title, message.body, message.command, message.yes)
