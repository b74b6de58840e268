"""Small modal dialogs: confirm, free text, and choose-or-type.

Each returns its answer through ``dismiss`` (``push_screen(..., callback)``): ``True`` /
``False`` for :class:`Confirm`, the text or ``None`` (cancelled) for the others. Prompts may
quote agent or tracker text, so they take ``rich.text.Text`` built by the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from symphony_tui.console.messages import console_app
from symphony_tui.console.sanitize import one_line

if TYPE_CHECKING:
    from symphony_tui.domain import Snapshot


class Confirm(ModalScreen[bool]):
    """Yes / no. ``y`` or ``enter`` on Yes confirms; ``n`` / ``esc`` cancels. The buttons
    are named ``yes`` and ``no`` (default "Cancel"): two different words, so a dialog whose
    action is itself a cancel names its other button differently.

    ``still_valid`` is asked on every repaint with the newest snapshot; once it says
    ``False`` (the worker the question is about has ended, say) the dialog closes as a
    "no" and tells the operator ``gone``, instead of offering an answer that would only
    fail. ``body_of`` (optional) rewrites the body from each snapshot (a count that moves
    while the question is open)."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm_yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm_no"),
    ]

    def __init__(
        self,
        title: str,
        body: Text,
        *,
        yes: str = "Yes",
        no: str = "Cancel",
        danger: bool = True,
        still_valid: Callable[[Snapshot], bool] | None = None,
        gone: str = "",
        body_of: Callable[[Snapshot], Text] | None = None,
    ) -> None:
        super().__init__(classes="dialog")
        self._title = title
        self._body = body
        self._yes = yes
        self._no = no
        self._danger = danger
        self._still_valid = still_valid
        self._gone = gone
        self._body_of = body_of

    def show(self, snapshot: Snapshot, now: datetime, tones: object) -> None:
        """Repaint hook of the console's refresh tick: the body follows ``body_of``; close
        when the question lapsed."""
        if self._body_of is not None and self.is_mounted:
            body = self._body_of(snapshot)
            if body.plain != self._body.plain:
                self._body = body
                self.query_one("#dialog-body", Static).update(body)
        if self._still_valid is None or self._still_valid(snapshot) or not self.is_current:
            return
        self._still_valid = None  # once
        if self._gone:
            self.app.notify(self._gone, severity="warning", markup=False)
        self.dismiss(False)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = self._title
            yield Static(self._body, id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button(
                    f"{self._yes} (y)", id="yes", variant="error" if self._danger else "primary"
                )
                yield Button(f"{self._no} (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class StopOrDetach(ModalScreen[str | None]):
    """``q`` with agents running under a scheduler that can outlive the console: ``s``
    stops them (``"stop"``), ``d`` leaves them running and detaches (``"detach"``),
    ``n`` / ``esc`` stays (None). ``attached``: the scheduler runs in another process
    (stopping it ends that process). The count follows the snapshots while the dialog is
    open (:meth:`show`): the operator answers about what runs now."""

    BINDINGS = [
        Binding("s,y", "answer('stop')", "Stop", id="quit_stop"),
        Binding("d", "answer('detach')", "Detach", id="quit_detach"),
        Binding("n,escape", "answer(None)", "Cancel", id="quit_cancel"),
    ]

    def __init__(self, running: int, *, attached: bool = False) -> None:
        super().__init__(classes="dialog")
        self.running = running
        self.attached = attached

    def _agents(self) -> str:
        return f"{self.running} agent{'s' if self.running != 1 else ''}"

    def _body(self) -> Text:
        agents = self._agents()
        if self.attached:
            text = (
                f"{agents} running in the scheduler this console is attached to. Stop them "
                "(the scheduler ends; their hooks get their grace), or leave them running "
                "and detach? `symphony-tui WORKFLOW.md` attaches again."
            )
        else:
            text = (
                f"{agents} running. Stop them, or leave them running and detach? The "
                "scheduler then runs on headless: `symphony-tui WORKFLOW.md` attaches again, "
                "`symphony-tui stop` ends it."
            )
        return Text(text, end="")

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = "Quit"
            yield Static(self._body(), id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"Stop {self._agents()} (s)", id="stop", variant="error")
                yield Button("Detach (d)", id="detach", variant="primary")
                yield Button("Cancel (n)", id="no")

    def show(self, snapshot: Snapshot, now: datetime, tones: object) -> None:
        """Follow the live count of running agents (the app's refresh, every snapshot)."""
        running = len(snapshot.running)
        if running == self.running:
            return
        self.running = running
        self.query_one("#dialog-body", Static).update(self._body())
        self.query_one("#stop", Button).label = f"Stop {self._agents()} (s)"

    def on_mount(self) -> None:
        self.query_one("#detach", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss({"stop": "stop", "detach": "detach"}.get(event.button.id or ""))

    def action_answer(self, value: str | None) -> None:
        self.dismiss(value)


class AskText(ModalScreen[str | None]):
    """One line of text. ``enter`` submits (empty allowed only if ``allow_empty``),
    ``esc`` cancels. ``suggestions`` complete as you type."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="ask_cancel")]

    def __init__(
        self,
        title: str,
        body: Text,
        *,
        placeholder: str = "",
        suggestions: list[str] | None = None,
        allow_empty: bool = False,
    ) -> None:
        super().__init__(classes="dialog")
        self._title = title
        self._body = body
        self._placeholder = placeholder
        self._suggestions = suggestions or []
        self._allow_empty = allow_empty

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = self._title
            yield Static(self._body, id="dialog-body")
            suggester = (
                SuggestFromList(self._suggestions, case_sensitive=False)
                if self._suggestions
                else None
            )
            yield Input(
                placeholder=self._placeholder,
                suggester=suggester,
                id="dialog-input",
                select_on_focus=False,
            )
            yield Label("enter: submit · esc: cancel", id="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).cursor_blink = console_app(self).cursor_blink
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        if value or self._allow_empty:
            self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Choose(ModalScreen[str | None]):
    """Pick one of ``choices`` (``enter``), or type free text when ``allow_text``
    (``tab`` reaches the text box, which shows ``text_placeholder``). A choice answers
    its label, or its entry in ``values`` when given (labels may repeat)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="choose_cancel")]

    def __init__(
        self,
        title: str,
        body: Text,
        choices: list[tuple[str, str | None]],
        *,
        allow_text: bool = False,
        text_placeholder: str = "or type an answer",
        values: list[str] | None = None,
    ) -> None:
        super().__init__(classes="dialog")
        self._title = title
        self._body = body
        self._choices = choices
        self._values = values or [label for label, _ in choices]
        self._allow_text = allow_text
        self._text_placeholder = text_placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = self._title
            yield Static(self._body, id="dialog-body")
            options = []
            for i, (label, description) in enumerate(self._choices):
                # display cleaned text; the original label is what gets answered
                prompt = Text(one_line(label, 60), style="bold", end="")
                if description:
                    prompt.append(f"  {one_line(description, 80)}", style="dim")
                options.append(Option(prompt, id=str(i)))
            yield OptionList(*options, id="dialog-options")
            if self._allow_text:
                yield Input(placeholder=self._text_placeholder, id="dialog-input")
            hint = "enter: choose · tab: type · esc: cancel" if self._allow_text else None
            yield Label(hint or "enter: choose · esc: cancel", id="dialog-hint")

    def on_mount(self) -> None:
        if self._allow_text:
            self.query_one(Input).cursor_blink = console_app(self).cursor_blink
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self._values[int(event.option.id or 0)])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
