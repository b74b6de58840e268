"""Worker detail shows the run's posture (docs/security.md): secrets withheld by name, the
sandbox and its policy, the network stance, the transport and the control API."""

from __future__ import annotations

from symphony_tui.console.screens.worker import worker_header
from symphony_tui.console.tones import Tones
from symphony_tui.domain.posture import RunPosture
from tests.console.sample import NOW, sample_snapshot

POSTURE = RunPosture(
    secrets_withheld=("LINEAR_API_KEY", "MY_API_TOKEN"),
    sandbox="codex workspace-write",
    sandbox_policy="thread_sandbox workspace-write; approval_policy on-request",
    network="blocked by the codex sandbox",
    transport="stdio: a codex app-server child process (JSON-RPC lines)",
    control_api="blocked by the sandbox's network rule (http://127.0.0.1:8080)",
)


def test_worker_detail_shows_the_posture():
    snap = sample_snapshot()
    row = snap.running[0].model_copy(update={"posture": POSTURE})
    snap = snap.model_copy(update={"running": (row, *snap.running[1:])})
    lines = worker_header(snap, row.issue_id, NOW, Tones()).plain.split("\n")
    sandbox = next(line for line in lines if line.startswith("sandbox "))
    assert "codex workspace-write (thread_sandbox workspace-write" in sandbox
    assert "network blocked by the codex sandbox" in sandbox and "transport stdio" in sandbox
    secrets = next(line for line in lines if line.startswith("secrets withheld "))
    assert "LINEAR_API_KEY, MY_API_TOKEN" in secrets and "control API blocked" in secrets
    bare = worker_header(sample_snapshot(), row.issue_id, NOW, Tones()).plain
    assert "secrets withheld" not in bare  # a row without a posture (an older scheduler)
