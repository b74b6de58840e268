"""A session on a GitHub board gets ``github_api`` and the state tool through the scheduler:
it comments on and labels its own issue with the scheduler's token (never in its environment),
is refused writes to other issues and reads outside the repository, and moves its issue on the
board; the operator's move (the console's ``m``) sets the board status too."""

from __future__ import annotations

import json
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain.commands import MoveIssue
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.scripted_backend import ScriptedBackend

from .conftest import TOKEN
from .test_github_scheduler_e2e import T0, orchestrator, until

BOARD = """\
  project:
    number: 1
    status_field: Status
"""
STATES = 'active_states: ["Todo", "In Progress"]\nterminal_states: ["Done"]'


async def test_github_api_tool_and_moves_through_the_scheduler(tmp_path: Path, fake) -> None:
    clock = FakeClock(T0)
    fake._clock = clock.now
    fake.add_board(statuses=("Backlog", "Todo", "In Progress", "Human Review", "Done"))
    other = fake.add_issue("someone else's", status="Backlog")
    mine = fake.add_issue("mine", status="Todo")
    seen: dict[str, object] = {}

    async def script(session, prompt, turn):
        host = session.host
        seen["tools"] = [t.name for t in host.tools]
        base = f"/repos/octo/app/issues/{host.issue.id}"
        seen["comment"] = await host.call_tool(
            "github_api", {"method": "POST", "path": base + "/comments", "body": {"body": "on it"}}
        )
        seen["label"] = await host.call_tool(
            "github_api", {"method": "POST", "path": base + "/labels", "body": {"labels": ["wip"]}}
        )
        seen["read"] = await host.call_tool(
            "github_api", {"method": "GET", "path": "/repos/octo/app/issues", "params": {"state": "all"}}
        )  # fmt: skip
        seen["other"] = await host.call_tool(
            "github_api",
            {"method": "PATCH", "path": f"/repos/octo/app/issues/{other}", "body": {"state": "closed"}},
        )  # fmt: skip
        seen["outside"] = await host.call_tool("github_api", {"method": "GET", "path": "/user"})
        seen["bad"] = await host.call_tool("github_api", {"method": "GET", "path": "https://x/y"})
        seen["move"] = await host.call_tool("symphony_set_issue_state", {"state": "Human Review"})
        return TurnResult(TurnStatus.COMPLETED)

    backend = ScriptedBackend(script)
    orch, _tracker, _store = orchestrator(
        tmp_path, fake, clock, backend, states=STATES, extra=BOARD
    )
    try:
        await orch.start()
        await until(lambda: "move" in seen and not orch.running)
        assert seen["tools"] == ["symphony_set_issue_state", "github_api"]
        comment = json.loads(seen["comment"].text)
        assert seen["comment"].success and comment["status"] == 201
        assert fake.issue(mine).comments[0]["body"] == "on it"
        assert seen["label"].success and "wip" in fake.issue(mine).labels
        assert seen["read"].success and len(json.loads(seen["read"].text)["body"]) == 2
        assert not seen["other"].success and "own issue" in seen["other"].text
        assert fake.issue(other).state == "open"
        assert not seen["outside"].success and not seen["bad"].success
        assert seen["move"].success and fake.status(mine) == "Human Review"
        texts = "".join(r.text for r in seen.values() if hasattr(r, "text"))
        assert TOKEN not in texts

        # The operator moves it back to Todo (the console's ``m``): the board follows.
        result = await orch.send(MoveIssue(issue_id=str(mine), state="todo"))
        assert result.ok, result.message
        assert fake.status(mine) == "Todo"
    finally:
        await orch.shutdown()


async def test_the_tool_works_on_the_issue_its_native_ref_names() -> None:
    # The dispatch id may be a board item (§4.1.1); the current issue's native_ref is the
    # tool's context for which issue the session may write to.
    from symphony_tui.domain import Issue
    from symphony_tui.trackers.github.tool import call_github_api

    class Repo:
        repo = "octo/app"
        sent: list[tuple[str, str]] = []

        async def rest(self, method, path, params, body):
            self.sent.append((method, path))
            return type("R", (), {"status": 201, "body": {"ok": True}, "text": ""})()

        def redact(self, text: str) -> str:
            return text

    issue = Issue(
        id="PVTI_item7", identifier="GH-7", title="t", state="Todo",
        native_ref={"repository": "octo/app", "number": 7, "project_item_id": "PVTI_item7"},
    )  # fmt: skip
    tracker = Repo()
    ok = await call_github_api(tracker, issue, {"method": "POST", "path": "/repos/octo/app/issues/7/comments"})  # fmt: skip
    refused = await call_github_api(tracker, issue, {"method": "POST", "path": "/repos/octo/app/issues/8/comments"})  # fmt: skip
    assert ok.success and not refused.success and "issues/7" in refused.text
    assert tracker.sent == [("POST", "/repos/octo/app/issues/7/comments")]
