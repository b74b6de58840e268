"""A tracker failure's text is shown on the console's status bar, printed by headless and
served by the API: when it quotes a request (httpx quotes an illegal header whole, token
included), the configured secret is masked before it is kept (docs/architecture.md
"Secrets")."""

from __future__ import annotations

import pytest

from symphony_tui.observability.redact import default_redactor, register_secret
from symphony_tui.trackers.base import TrackerError

SECRET = "ghp_masked0123456789abcdef"


@pytest.fixture(autouse=True)
def _forget_secrets():
    yield
    default_redactor().clear()


def test_tracker_error_text_is_masked_before_it_reaches_the_snapshot(make_harness):
    h = make_harness([])
    register_secret(SECRET)
    text = f"request failed: LocalProtocolError: Illegal header value b'Bearer {SECRET}\\n'"
    h.orch.state.tracker_failed(TrackerError("github_api_request", text), "poll")
    shown = h.orch.snapshot().tracker_error
    assert shown is not None and "Illegal header value" in shown
    assert SECRET not in shown
    # the same failure again is recognised as a repeat (compared in its masked form)
    h.orch.state.tracker_failed(TrackerError("github_api_request", text), "poll")
    assert h.orch.snapshot().tracker_error == shown
