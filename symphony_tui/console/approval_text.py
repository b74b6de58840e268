"""What an approval asks, in words (pure; no Textual). Source: ApprovalRequest fields,
docs/protocols.md "Cross-backend map" / "Approvals"."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.domain import ApprovalKind

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import ApprovalRequest

KIND_LABELS: dict[ApprovalKind, str] = {
    ApprovalKind.COMMAND: "$ command",
    ApprovalKind.FILE_CHANGE: "± files",
    ApprovalKind.PERMISSIONS: "⚿ permissions",
    ApprovalKind.USER_INPUT: "? question",
    ApprovalKind.ELICITATION: "? elicitation",
    ApprovalKind.CONFIRMATION: "! confirm",
}


def asked(a: ApprovalRequest, limit: int = 80) -> str:
    """One line saying what is asked: the command, the files, the permissions or the
    first question; falls back to ``summary``."""
    if a.kind == ApprovalKind.COMMAND and a.command:
        return one_line(a.command, limit)
    if a.kind == ApprovalKind.FILE_CHANGE and a.files:
        more = f" (+{len(a.files) - 3})" if len(a.files) > 3 else ""
        return one_line(", ".join(a.files[:3]) + more, limit)
    if a.kind == ApprovalKind.PERMISSIONS and a.permissions:
        return one_line(", ".join(sorted(a.permissions)), limit)
    if a.questions:
        q = a.questions[0]
        return one_line(q.question or q.header, limit)
    return one_line(a.summary or a.reason or a.kind.value, limit)


def approval_detail(a: ApprovalRequest, now: datetime, tones: Tones) -> Text:
    """Every field of the request worth reading before answering, inert."""
    text = Text(end="")

    def field(name: str, value: Text | str) -> None:
        if text.plain:
            text.append("\n")
        text.append(f"{name:<11}", style=tones.muted)
        text.append_text(value if isinstance(value, Text) else inert(value, limit=200))

    if a.project is not None:  # a fleet console's: which scheduler asks
        field("project", inert(a.project, tones.bold, limit=80))
    field("issue", Text(one_line(a.issue_identifier or a.issue_id, 30), style=tones.bold))
    field("backend", a.backend or "-")
    field("kind", KIND_LABELS.get(a.kind, a.kind.value))
    if a.summary:
        field("summary", a.summary)
    if a.command:
        field("command", inert(a.command, tones.bold, multiline=True))
    if a.cwd:
        field("cwd", a.cwd)
    if a.reason:
        field("reason", a.reason)
    for path in a.files:
        field("file", path)
    if a.permissions:
        field("permissions", json.dumps(a.permissions, sort_keys=True, default=str))
    for q in a.questions:
        label = one_line(q.header or q.id, 20)
        body = Text(end="")
        body.append_text(inert(q.question or "(no text)"))
        if q.options:
            body.append("  [")
            body.append(" | ".join(one_line(o.label, 30) for o in q.options))
            body.append("]")
        else:
            body.append("  (free text)", style=tones.muted)
        field(f"? {label}", body)
    field("age", fmt.age(a.created_at, now))
    field("time left", fmt.until(a.deadline_at, now))
    # what may be answered is shown as keys by the approvals screen (``available``)
    return text


def permission_choices(a: ApprovalRequest) -> list[tuple[str, dict[str, Any]]]:
    """The parts of a permissions request one can grant alone, as (label, grant) pairs.

    ``grant`` has the request's own shape (codex ``GrantedPermissionProfile``): network
    access, then each file-system path asked for read or write. Empty for other kinds.
    """
    perms = a.permissions or {}
    out: list[tuple[str, dict[str, Any]]] = []
    network = perms.get("network")
    if isinstance(network, dict) and network.get("enabled"):
        out.append(("network access", {"network": dict(network)}))
    fs = perms.get("fileSystem")
    if isinstance(fs, dict):
        for mode in ("write", "read"):
            for path in fs.get(mode) or []:
                if isinstance(path, str):
                    out.append((f"{mode} {path}", {"fileSystem": {mode: [path]}}))
    return out
