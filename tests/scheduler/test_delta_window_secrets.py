"""A secret streamed in pieces is masked in the run's last message as the operator sees it
(snapshot and API), though the delta window is masked once per snapshot, not per delta."""

from __future__ import annotations

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.observability.redact import default_redactor, register_secret

from .conftest import make_issue

SECRET = "zq-streamed-secret-0123456789"


async def test_a_secret_split_across_deltas_is_masked_in_the_snapshot(make_harness):
    async def stream(session, prompt, turn):
        for piece in ("the key is zq-streamed", "-secret-01234", "56789 ok"):
            session.host.emit(AgentEvent(kind=EventKind.MESSAGE_DELTA, message=piece))
        return await session.wait_interrupt()

    register_secret(SECRET)
    try:
        h = make_harness([make_issue(1)], script=stream)
        await h.start()
        await h.settle()
        row = h.orch.snapshot().running[0]
        assert row.last_message == "the key is *** ok"
        state = h.orch.snapshot().state_payload()
        assert SECRET not in str(state) and "***" in state["running"][0]["last_message"]
    finally:
        default_redactor().clear()
