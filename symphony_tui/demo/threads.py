"""Thread state of the demo agent: turns, token totals, approvals granted, persistence.

Shapes follow the codex 0.171 v2 schema (``Thread``, ``Turn``, ``ThreadTokenUsage``,
``SandboxPolicy``; docs/protocols.md "Codex app-server"). A thread is saved as JSON under
``<cwd>/.symphony-demo/threads/<id>.json`` after every turn, so that ``thread/resume`` works in
a new agent process the way codex reloads its rollout files; a turn still ``inProgress`` when
the process died reads back as ``interrupted``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symphony_tui import __version__
from symphony_tui.demo.directives import Directives

STATE_DIR = ".symphony-demo"
MODEL = "symphony-demo"
MODEL_PROVIDER = "symphony-demo"
CONTEXT_WINDOW = 272_000
APPROVAL_POLICIES = ("untrusted", "on-request", "never")
SANDBOXES = {
    "read-only": {"type": "readOnly", "networkAccess": False},
    "workspace-write": {
        "type": "workspaceWrite",
        "writableRoots": [],
        "networkAccess": False,
        "excludeTmpdirEnvVar": False,
        "excludeSlashTmp": False,
    },
    "danger-full-access": {"type": "dangerFullAccess"},
}


def new_id() -> str:
    return str(uuid.uuid4())


@dataclass
class Breakdown:
    """Token counts of the codex ``TokenUsageBreakdown`` shape. ``total = input + output``;
    ``cached`` is part of ``input`` and ``reasoning`` part of ``output``."""

    input: int = 0
    cached: int = 0
    output: int = 0
    reasoning: int = 0

    def add(self, other: Breakdown) -> None:
        self.input += other.input
        self.cached += other.cached
        self.output += other.output
        self.reasoning += other.reasoning

    def to_wire(self) -> dict[str, int]:
        return {
            "totalTokens": self.input + self.output,
            "inputTokens": self.input,
            "cachedInputTokens": self.cached,
            "outputTokens": self.output,
            "reasoningOutputTokens": self.reasoning,
        }


@dataclass
class TurnRecord:
    """One turn and its items (``ThreadItem`` shapes, in the order they started): an item
    with a ``status`` (command, file change, tool call) is kept from its start and replaced
    when it completes, the others (messages, reasoning) once they are complete."""

    id: str
    status: str = "inProgress"
    error: str | None = None
    started_at: int = field(default_factory=lambda: int(time.time()))
    completed_at: int | None = None
    duration_ms: int | None = None
    items: list[dict[str, Any]] = field(default_factory=list)

    def keep_item(self, item: dict[str, Any]) -> None:
        """Record ``item`` (replacing the earlier state of the same item id)."""
        for i, kept in enumerate(self.items):
            if kept.get("id") == item.get("id"):
                self.items[i] = item
                return
        self.items.append(item)

    def to_wire(self, items_view: str = "full") -> dict[str, Any]:
        """The codex ``Turn``; ``items_view`` ``notLoaded`` leaves ``items`` empty,
        ``summary`` keeps the user and agent messages, ``full`` every item."""
        if items_view == "notLoaded":
            items: list[dict[str, Any]] = []
        elif items_view == "summary":
            items = [i for i in self.items if i.get("type") in ("userMessage", "agentMessage")]
        else:
            items = list(self.items)
        return {
            "id": self.id,
            "items": items,
            "itemsView": items_view,
            "status": self.status,
            "error": None if self.error is None else {"message": self.error},
            "startedAt": self.started_at,
            "completedAt": self.completed_at,
            "durationMs": self.duration_ms,
        }


@dataclass
class DemoThread:
    """One conversation: its cwd, policies, tools, turns and cumulative token usage."""

    id: str
    cwd: Path
    approval_policy: Any = "on-request"
    sandbox: str = "workspace-write"
    tools: tuple[str, ...] = ()
    directives: Directives = field(default_factory=Directives)
    turns: list[TurnRecord] = field(default_factory=list)
    total: Breakdown = field(default_factory=Breakdown)
    context: int = 0
    approved_commands: set[str] = field(default_factory=set)
    preview: str = ""
    created_at: int = field(default_factory=lambda: int(time.time()))
    updated_at: int = field(default_factory=lambda: int(time.time()))
    #: ``activeFlags`` of the running turn (``waitingOnApproval`` while an approval waits).
    active_flags: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.cwd / STATE_DIR / "threads" / f"{self.id}.json"

    @property
    def active_turn(self) -> TurnRecord | None:
        if self.turns and self.turns[-1].status == "inProgress":
            return self.turns[-1]
        return None

    # -- tokens ----------------------------------------------------------------------------

    def account(self, prompt_tokens: int, output_tokens: int, reasoning: int) -> Breakdown:
        """Record one simulated model response: the whole context is sent again (most of it
        cached), the output joins the context. Returns the response's own ``last`` usage."""
        last = Breakdown(
            input=self.context + prompt_tokens,
            cached=self.context,
            output=output_tokens + reasoning,
            reasoning=reasoning,
        )
        self.total.add(last)
        self.context += prompt_tokens + output_tokens
        return last

    def usage_wire(self, last: Breakdown) -> dict[str, Any]:
        return {
            "total": self.total.to_wire(),
            "last": last.to_wire(),
            "modelContextWindow": CONTEXT_WINDOW,
        }

    # -- wire shapes -----------------------------------------------------------------------

    def to_wire(self, *, include_turns: bool = True, status: str | None = None) -> dict[str, Any]:
        if status is None:
            status = "active" if self.active_turn else "idle"
        state: dict[str, Any] = {"type": status}
        if status == "active":
            state["activeFlags"] = list(self.active_flags)
        return {
            "id": self.id,
            "sessionId": self.id,
            "forkedFromId": None,
            "parentThreadId": None,
            "preview": self.preview,
            "ephemeral": False,
            "projectId": None,
            "modelProvider": MODEL_PROVIDER,
            "model": MODEL,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "status": state,
            "path": str(self.path),
            "cwd": str(self.cwd),
            "cliVersion": __version__,
            "source": "appServer",
            "agentNickname": None,
            "agentRole": None,
            "gitInfo": None,
            "name": None,
            "turns": [t.to_wire() for t in self.turns] if include_turns else [],
        }

    def session_result(self, *, include_turns: bool = True) -> dict[str, Any]:
        """The result of ``thread/start`` / ``thread/resume``."""
        return {
            "thread": self.to_wire(include_turns=include_turns),
            "model": MODEL,
            "modelProvider": MODEL_PROVIDER,
            "serviceTier": None,
            "cwd": str(self.cwd),
            "instructionSources": [],
            "approvalPolicy": self.approval_policy,
            "approvalsReviewer": "user",
            "sandbox": SANDBOXES[self.sandbox],
            "reasoningEffort": None,
        }

    # -- persistence -----------------------------------------------------------------------

    def save(self) -> None:
        """Write the thread atomically; failures are not fatal (the demo goes on)."""
        self.updated_at = int(time.time())
        data = {
            "id": self.id,
            "cwd": str(self.cwd),
            "approvalPolicy": self.approval_policy,
            "sandbox": self.sandbox,
            "tools": list(self.tools),
            "directives": sorted(self.directives.known),
            "turns": [t.__dict__ for t in self.turns],
            "total": self.total.__dict__,
            "context": self.context,
            "approvedCommands": sorted(self.approved_commands),
            "preview": self.preview,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, path: Path) -> DemoThread:
        """Read a saved thread. Raises ``OSError`` / ``ValueError`` / ``KeyError`` if unusable."""
        data = json.loads(path.read_text(encoding="utf-8"))
        turns = [TurnRecord(**t) for t in data["turns"]]
        for t in turns:
            if t.status == "inProgress":  # the process died mid-turn
                t.status = "interrupted"
        return cls(
            id=data["id"],
            cwd=Path(data["cwd"]),
            approval_policy=data["approvalPolicy"],
            sandbox=data["sandbox"],
            tools=tuple(data["tools"]),
            directives=Directives(frozenset(data["directives"])),
            turns=turns,
            total=Breakdown(**data["total"]),
            context=int(data["context"]),
            approved_commands=set(data["approvedCommands"]),
            preview=data["preview"],
            created_at=int(data["createdAt"]),
            updated_at=int(data["updatedAt"]),
        )


def find_saved(thread_id: str, cwd: Path) -> Path | None:
    """Where a thread would be saved under ``cwd``, if it is there (ids are not paths)."""
    if not thread_id or any(c in thread_id for c in "/\\") or thread_id.startswith("."):
        return None
    path = cwd / STATE_DIR / "threads" / f"{thread_id}.json"
    return path if path.is_file() else None
