"""Each run's posture (scheduler/posture.py, docs/security.md) and the identifiers the
scheduler refuses to dispatch."""

from __future__ import annotations

from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.config.settings import resolve_settings
from symphony_tui.config.validate import root_problem
from symphony_tui.domain import ApprovalKind, ApprovalRequest
from symphony_tui.scheduler.posture import ControlSurface, run_posture
from tests.scheduler.conftest import make_issue

API = ControlSurface("http://127.0.0.1:8080")


def _settings(**front):
    return resolve_settings(
        {"tracker": {"kind": "local", "path": "i.yaml", "secret_env_names": ["VENDOR"]}, **front},
        Path("."),
        env={},
    )


def test_codex_posture_names_withheld_secrets_sandbox_network_and_the_api() -> None:
    env = {"VENDOR": "v", "LINEAR_API_KEY": "k", "MY_TOKEN": "t", "UNSET_ONE": ""}
    p = run_posture(
        _settings(), "codex", None, secrets=frozenset({"MY_TOKEN", "UNSET_ONE"}), env=env,
        control=API,
    )  # fmt: skip
    assert p.secrets_withheld == ("LINEAR_API_KEY", "MY_TOKEN", "VENDOR")
    assert p.sandbox == "codex workspace-write" and "on-request" in p.sandbox_policy
    assert p.network.startswith("blocked") and p.transport.startswith("unix socket: a detached")
    assert p.control_api.startswith("blocked by the sandbox")
    wrapped = _settings(codex={"command": "tee wire.log | codex app-server"})
    assert run_posture(wrapped, "codex", None, env={}, control=API).transport.startswith("stdio")
    open_net = _settings(
        codex={"turn_sandbox_policy": {"type": "workspaceWrite", "networkAccess": True}}
    )
    p = run_posture(open_net, "codex", None, env={}, control=API)
    assert p.network.startswith("open") and "networkAccess true" in p.sandbox_policy
    assert p.control_api.startswith("reachable at http://127.0.0.1:8080")
    assert "refused from this run's processes" in p.control_api


def test_other_backends_hosts_and_no_api() -> None:
    p = run_posture(_settings(), "opencode", None, env={}, control=None)
    assert p.sandbox.startswith("none") and p.network.startswith("open")
    assert p.control_api.startswith("none served")
    p = run_posture(_settings(), "openhands", "build-1", env={}, control=API)
    assert "ssh forward" in p.transport and "build-1" in p.transport
    assert p.control_api.startswith("not from build-1")
    wide = ControlSurface("http://10.0.0.5:8080", loopback=False, token_required=True)
    p = run_posture(_settings(), "codex", "build-1", env={}, control=wide)
    assert "bearer token, which is withheld" in p.control_api
    assert p.transport.startswith("unix socket on build-1")


def test_an_exec_server_host_is_named_as_such_not_as_codex_over_ssh() -> None:
    hosts = {
        "ssh_hosts": ["build-1", "build-2"],
        "hosts": {"build-2": {"codex_mode": "exec-server"}},
    }
    p = run_posture(_settings(worker=hosts), "codex", "build-2", env={}, control=API)
    assert p.transport.startswith("exec-server on build-2: a codex app-server here")
    assert "codex.env stays here" in p.transport
    assert p.control_api.startswith("not from build-2")
    p = run_posture(_settings(worker=hosts), "codex", "build-1", env={}, control=API)
    assert p.transport.startswith("unix socket on build-1")
    p = run_posture(_settings(worker=hosts), "codex", None, env={}, control=API)
    assert p.transport.startswith("unix socket: a detached")


def test_an_acp_agent_is_reached_over_its_stdio_not_a_server() -> None:
    p = run_posture(_settings(), "acp", None, env={}, control=API)
    assert p.transport == "stdio: JSON-RPC lines with an ACP agent child process"
    assert "server" not in p.transport
    assert p.sandbox.startswith("none") and "agent.approvals" in p.sandbox_policy
    p = run_posture(_settings(), "acp", "build-1", env={}, control=API)
    assert p.transport == "ssh to build-1: JSON-RPC over the ACP agent's stdio"


async def asking(session, prompt, turn):
    await session.host.request_approval(
        ApprovalRequest(id="ap-1", issue_id="", kind=ApprovalKind.COMMAND, command="make")
    )
    return TurnResult(TurnStatus.COMPLETED)


async def test_a_run_carries_its_posture_into_the_snapshot(make_harness, monkeypatch) -> None:
    monkeypatch.setenv("LINEAR_API_KEY", "set-here")
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    row = h.orch.snapshot().running[0]
    assert row.posture is not None and row.posture.transport.startswith("unix socket")
    assert "LINEAR_API_KEY" in row.posture.secrets_withheld


async def test_an_identifier_with_a_control_character_is_not_dispatched(make_harness) -> None:
    bad = make_issue(1).model_copy(update={"identifier": "AB\x00C"})
    h = make_harness([bad, make_issue(2)])
    await h.start()
    await h.settle()
    snap = h.orch.snapshot()
    assert "AB\x00C" not in {r.issue_identifier for r in snap.running}
    assert bad.id not in h.orch.retrying
    row = next(r for r in snap.issues if r.issue_id == bad.id)
    assert row.note == "not dispatched: control character U+0000 in its identifier"


def test_a_workspace_root_that_is_a_file_is_one_line(tmp_path) -> None:
    afile = tmp_path / "root"
    afile.write_text("x")
    problem = root_problem(afile)
    assert problem and "is a file" in problem and "\n" not in problem
    assert "its parent" in (root_problem(afile / "sub") or "")
    assert root_problem(tmp_path / "new" / "ws") is None


def test_codex_runs_detached_by_default_only_with_codexs_own_app_server() -> None:
    """``codex.transport: auto`` (the default): codex's own ``codex app-server`` (any path to
    ``codex``, options before ``app-server``) takes
    ``--listen`` and runs detached, so its turn survives a restart; any other command (a
    wrapper that reads stdin, another agent) stays on stdio; ``stdio`` / ``unix`` choose."""
    assert _settings().codex.detached
    assert _settings(codex={"command": "  codex   app-server "}).codex.detached
    assert _settings(codex={"command": "/opt/codex/bin/codex app-server"}).codex.detached
    assert _settings(codex={"command": "codex -c model=o3 app-server"}).codex.detached
    assert not _settings(codex={"command": "codex app-server > wire.log"}).codex.detached
    assert not _settings(codex={"command": "/opt/bin/codex-wrapper app-server"}).codex.detached
    assert not _settings(codex={"command": "tee wire.log | codex app-server"}).codex.detached
    assert not _settings(codex={"command": "python3 -m my_agent"}).codex.detached
    assert not _settings(codex={"transport": "stdio"}).codex.detached
    assert _settings(codex={"command": "my-codex app-server", "transport": "unix"}).codex.detached
