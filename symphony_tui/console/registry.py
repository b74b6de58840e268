"""Every console command, defined once.

One :class:`ConsoleCommand` produces the ``Binding`` (with ``id=`` so a keymap can remap
it), the footer text, the command-palette entry and the help-screen line (each command is
defined once, after hike / textual-enhanced). Screens ask :func:`bindings_for` for their
scope; the help screen and the palette read :data:`COMMANDS`.

Scopes: ``app`` commands act on "the selected issue / approval" of whatever screen is
active (each screen answers :class:`~symphony_tui.console.selection.Selection`); the other
scopes belong to one screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from textual.binding import Binding

Scope = Literal[
    "app", "main", "worker", "approvals", "recovered", "diff", "audit", "hosts", "projects"
]
Requires = Literal[
    "issue",
    "running",
    "approval",
    "accept",
    "decline",
    "cancel",
    "question",
    "rerun",
    "budget",
    "workspace",
]

SCOPE_TITLES: dict[Scope, str] = {
    "app": "Everywhere",
    "main": "Main screen",
    "worker": "Worker detail",
    "approvals": "Approvals",
    "recovered": "Recovered workspaces",
    "diff": "Diff",
    "audit": "Audit log",
    "hosts": "Worker hosts",
    "projects": "Projects (fleet)",
}


@dataclass(frozen=True)
class ConsoleCommand:
    """One command.

    ``id`` is the binding id (keymap files map it to keys), ``key`` the default key(s)
    (comma separated, Textual key names), ``action`` the action string run on the
    scope's owner, ``label`` the short footer text, ``help`` the help / palette line.
    ``requires`` names what must be selected for the command to apply (checked by
    ``check_action``); ``show`` puts it in the footer; ``confirm`` marks commands that
    ask first; ``priority`` runs it as the key arrives, before keys already queued behind
    it reach the focused widget (the filter: what is typed right after ``/`` goes into it).
    ``fleet_help`` is the help line in a fleet console when it differs there
    (:meth:`help_in`).
    """

    id: str
    key: str
    action: str
    label: str
    help: str
    scope: Scope = "app"
    requires: Requires | None = None
    show: bool = True
    palette: bool = True
    confirm: bool = False
    key_display: str | None = None
    priority: bool = False
    fleet: bool = False
    fleet_help: str | None = None

    def help_in(self, fleet: bool) -> str:
        """The help line in a fleet console (``fleet``) or one scheduler's."""
        return self.fleet_help if fleet and self.fleet_help is not None else self.help

    @property
    def action_name(self) -> str:
        """The action method name without namespace or arguments (``approve``)."""
        return self.action.split("(", 1)[0].rsplit(".", 1)[-1]

    def binding(self) -> Binding:
        return Binding(
            self.key,
            self.action,
            self.label,
            show=self.show,
            key_display=self.key_display,
            tooltip=self.help,
            id=self.id,
            priority=self.priority,
        )


COMMANDS: tuple[ConsoleCommand, ...] = (
    # -- acting on the selected worker / issue / approval (every non-modal screen)
    ConsoleCommand(
        "interrupt", "i", "interrupt", "Interrupt",
        "Interrupt the selected worker's turn (the issue is then held)",
        requires="running", confirm=True,
    ),
    ConsoleCommand(
        "approve", "a", "approve", "Approve",
        "Approve the selected pending approval once",
        requires="accept",
    ),
    ConsoleCommand(
        "approve_session", "A", "approve_session", "Approve for session",
        "Approve the selected pending approval for the rest of the session",
        requires="accept", show=False,
    ),
    ConsoleCommand(
        "deny", "d", "deny", "Deny",
        "Deny the selected pending approval",
        requires="decline",
    ),
    ConsoleCommand(
        "deny_message", "D", "deny_message", "Deny+msg",
        "Deny the selected pending approval with a message for the agent",
        requires="decline", show=False,
    ),
    ConsoleCommand(
        "cancel_turn", "c", "cancel_turn", "Cancel turn",
        "Deny the selected pending approval and end the agent's turn",
        requires="cancel", show=False, confirm=True,
    ),
    ConsoleCommand(
        "grant", "g", "grant", "Grant part",
        "Grant part of the selected permissions request, for the turn or the session",
        requires="accept", show=False,
    ),
    ConsoleCommand(
        "answer", "t", "answer", "Answer",
        "Answer the selected agent question (text or a choice)",
        requires="question",
    ),
    ConsoleCommand(
        "rerun", "r", "rerun", "Rerun",
        "Rerun the selected issue now (clears any retry backoff)",
        requires="rerun", show=False,
    ),
    ConsoleCommand(
        "steer", "n", "steer", "Message",
        "Send a message to the selected worker's agent now (into its running turn)",
        requires="running", show=False,
    ),
    ConsoleCommand(
        "budget", "b", "budget", "Budget",
        "Extend the token budget of the selected worker held by it, or stop it",
        requires="budget",
    ),
    ConsoleCommand(
        "stop", "s", "stop", "Stop",
        "Stop the selected worker (its workspace kept, the issue held)",
        requires="running", confirm=True,
    ),
    ConsoleCommand(
        "move", "m", "move", "Move",
        "Move the selected issue to another tracker state",
        requires="issue", show=False,
    ),
    ConsoleCommand(
        "refresh", "R", "refresh", "Refresh",
        "Poll the tracker and reconcile now",
        show=False,
    ),
    ConsoleCommand(
        "pause", "p", "toggle_pause", "Pause",
        "Pause or resume dispatching new work (running work goes on)",
        show=False,
        fleet_help=(
            "Pause or resume one project's dispatching: asks first, naming the project of "
            "the focused row (else the filter's; else you pick it)"
        ),
    ),
    ConsoleCommand(
        "approvals", "v", "show_approvals", "Approvals",
        "Open the approvals screen (all pending, oldest first)",
    ),
    ConsoleCommand(
        "recovered", "w", "show_recovered", "Workspaces",
        "Open the recovered workspaces screen",
        show=False,
    ),
    # -- the diff and audit screens, into the workspace (console/workspace_actions.py)
    ConsoleCommand(
        "diff", "equals_sign", "show_diff", "Diff",
        "Show what the agent changed in the selected workspace (files, +/-, each diff)",
        requires="workspace", show=False, key_display="=",
    ),
    ConsoleCommand(
        "workspace", "o", "workspace", "Workspace",
        "Into the selected workspace: a shell, $EDITOR, copy ids, the path or a command",
        requires="workspace", show=False,
    ),
    ConsoleCommand(
        "audit", "H", "show_audit", "Audit",
        "Open the audit log: every operator action, who, when and its result",
        show=False,
    ),
    ConsoleCommand(
        "hosts", "h", "show_hosts", "Hosts",
        "Open the worker hosts screen (worker.ssh_hosts): up/down, runs, drain",
        show=False,
    ),
    ConsoleCommand(
        "projects", "P", "show_projects", "Projects",
        "Fleet: open the projects table (each scheduler's link, runs, approvals, tokens)",
        show=False, fleet=True,
    ),
    ConsoleCommand(
        "project_filter", "F", "cycle_project", "Project",
        "Fleet: show one project's rows in every pane, the next project each press, then all",
        show=False, fleet=True,
    ),
    ConsoleCommand(
        "help", "question_mark", "help", "Help", "Show every key",
        key_display="?",
    ),
    ConsoleCommand(
        "quit", "q", "quit", "Quit",
        "Quit: while agents run, asks: stop them, or leave them running and detach",
        confirm=True,
        # a fleet console cannot stop its schedulers (``FleetPort.carries_stop``)
        fleet_help="Quit the fleet console: its schedulers and their agents keep running",
    ),
    # -- main screen
    ConsoleCommand(
        "focus_issues", "1", "focus_pane('issues')", "Issues",
        "Focus the issues pane", scope="main", show=False, palette=False,
    ),
    ConsoleCommand(
        "focus_workers", "2", "focus_pane('workers')", "Workers",
        "Focus the active workers pane", scope="main", show=False, palette=False,
    ),
    ConsoleCommand(
        "focus_log", "3", "focus_pane('log')", "Log",
        "Focus the event log", scope="main", show=False, palette=False,
    ),
    ConsoleCommand(
        "focus_tokens", "4", "focus_pane('tokens')", "Tokens",
        "Focus the token usage pane", scope="main", show=False, palette=False,
    ),
    ConsoleCommand(
        "next_pane", "tab", "app.focus_next", "Next pane",
        "Cycle focus through the panes", scope="main", show=False, palette=False,
    ),
    ConsoleCommand(
        "filter", "slash", "filter_log", "Filter",
        "Filter the event log: issue identifier, kind:NAME, words",
        scope="main", key_display="/", priority=True,
    ),
    ConsoleCommand(
        "follow_log", "f", "follow_log", "Follow",
        "Event log: follow new lines on/off (off: new lines never move the view)",
        scope="main", show=False,
    ),
    ConsoleCommand(
        "pause_log", "space", "pause_log", "Pause log",
        "Event log: pause/resume appending (a badge counts what came in)",
        scope="main", show=False, key_display="space",
    ),
    ConsoleCommand(
        "open_worker", "enter", "open_worker", "Detail",
        "Open the selected worker's detail (transcript)", scope="main", show=False,
        requires="issue",
    ),
    ConsoleCommand(
        "clear_filter", "escape", "clear_filter", "Clear filter",
        "Clear the event log filter", scope="main", show=False, palette=False,
    ),
    ConsoleCommand(
        "export_log", "e", "app.export", "Export",
        "Write the event log, as filtered, to a file", scope="main", show=False,
    ),
    # -- sub screens
    ConsoleCommand(
        "worker_back", "escape", "app.pop_screen", "Back",
        "Back to the main screen", scope="worker", palette=False,
    ),
    ConsoleCommand(
        "worker_rerun", "r", "rerun_worker", "Rerun",
        "Rerun this issue now (shown when it is not running)", scope="worker",
    ),
    ConsoleCommand(
        "transcript_follow", "f", "follow_transcript", "Follow",
        "Transcript: follow new lines on/off", scope="worker", show=False,
    ),
    ConsoleCommand(
        "export_transcript", "e", "app.export", "Export",
        "Write this worker's transcript to a file", scope="worker", show=False,
    ),
    ConsoleCommand(
        "diff_back", "escape", "app.pop_screen", "Back",
        "Back to the previous screen", scope="diff", palette=False,
    ),
    ConsoleCommand(
        "diff_next_page", "right_square_bracket", "next_page", "Next page",
        "Diff: the next page of this file's diff", scope="diff", key_display="]",
    ),
    ConsoleCommand(
        "diff_previous_page", "left_square_bracket", "previous_page", "Prev page",
        "Diff: the previous page of this file's diff", scope="diff", key_display="[",
    ),
    ConsoleCommand(
        "diff_reload", "R", "reload_diff", "Reload",
        "Diff: compute the workspace's diff again", scope="diff",
    ),
    ConsoleCommand(
        "audit_back", "escape", "app.pop_screen", "Back",
        "Back to the previous screen", scope="audit", palette=False,
    ),
    ConsoleCommand(
        "approvals_back", "escape", "app.pop_screen", "Back",
        "Back to the main screen", scope="approvals", palette=False,
    ),
    ConsoleCommand(
        "recovered_back", "escape", "app.pop_screen", "Back",
        "Back to the main screen", scope="recovered", palette=False,
    ),
    ConsoleCommand(
        "reattach", "r", "reattach_selected", "Re-attach",
        "Rerun the issue resuming its recorded session (thread / conversation)",
        scope="recovered",
    ),
    ConsoleCommand(
        "recovered_rerun", "r", "rerun_selected", "Rerun",
        "Rerun the issue (a new session: none recorded, or the backend cannot resume)",
        scope="recovered",
    ),
    ConsoleCommand(
        "remove_workspace", "x", "remove_workspace", "Remove",
        "Remove the workspace folder (runs before_remove)",
        scope="recovered", confirm=True,
    ),
    ConsoleCommand(
        "copy_path", "y", "copy_path", "Copy path",
        "Copy the workspace path to the clipboard (OSC 52, your terminal permitting)",
        scope="recovered",
    ),
    ConsoleCommand(
        "projects_back", "escape", "app.pop_screen", "Back",
        "Back to the previous screen", scope="projects", palette=False, fleet=True,
    ),
    ConsoleCommand(
        "filter_project", "enter", "filter_selected", "Filter",
        "Show only the selected project's rows in every pane (on the filtered one: all)",
        scope="projects", fleet=True,
    ),
    ConsoleCommand(
        "hosts_back", "escape", "app.pop_screen", "Back",
        "Back to the previous screen", scope="hosts", palette=False,
    ),
    ConsoleCommand(
        "drain_host", "d", "drain_selected", "Drain",
        "Drain the selected host: no new issue goes there; its runs go on",
        scope="hosts", confirm=True,
    ),
    ConsoleCommand(
        "undrain_host", "d", "undrain_selected", "Undrain",
        "Undrain the selected host: it takes new issues again",
        scope="hosts",
    ),
    ConsoleCommand(
        "probe_host", "P", "probe_selected", "Probe",
        "Probe the selected host now: a down one before its backoff ends, an up one's round trip",
        scope="hosts",
    ),
)  # fmt: skip

BY_ID: dict[str, ConsoleCommand] = {c.id: c for c in COMMANDS}
APP_BY_ACTION: dict[str, ConsoleCommand] = {c.action_name: c for c in COMMANDS if c.scope == "app"}


def bindings_for(scope: Scope) -> list[Binding]:
    """The ``BINDINGS`` list of the owner of ``scope``."""
    return [c.binding() for c in COMMANDS if c.scope == scope]


def commands_for(scope: Scope) -> tuple[ConsoleCommand, ...]:
    return tuple(c for c in COMMANDS if c.scope == scope)


def display_key(key: str) -> str:
    """Human form of a Textual key list (``question_mark`` -> ``?``)."""
    names = {
        "question_mark": "?",
        "slash": "/",
        "escape": "esc",
        "enter": "enter",
        "tab": "tab",
        "space": "space",
        "equals_sign": "=",
        "left_square_bracket": "[",
        "right_square_bracket": "]",
    }
    return ", ".join(names.get(k.strip(), k.strip()) for k in key.split(","))
