"""``tracker.required_labels`` filters candidates (the reference's routing)."""

from __future__ import annotations

from .conftest import make_issue

FRONT = (
    "tracker:\n  kind: local\n  path: issues.yaml\n  required_labels: [Agent, backend]\n"
    "agent:\n  max_concurrent_agents: 10\n"
)


async def test_issues_lacking_a_required_label_are_not_dispatched(make_harness) -> None:
    both = make_issue(1).model_copy(update={"labels": ("agent", "backend", "ui")})
    one = make_issue(2).model_copy(update={"labels": ("agent",)})
    none = make_issue(3)
    h = make_harness([both, one, none], front=FRONT)
    await h.start()
    await h.settle()
    dispatched = {s.host.issue.id for s in h.backend.sessions}
    assert dispatched == {"id-1"}
