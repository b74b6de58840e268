"""Worker hosts end to end with ``agent.backend: opencode``: a real ``symphony-tui --headless``
dispatches two issues over two worker hosts (real sshd on 127.0.0.1 / 127.0.0.2), each
run's real ``opencode serve`` starts on its host and streams from the fake model through
the port forward; a stop and an interrupt through the API leave nothing of either run on
the hosts."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.opencode_env import FAKE_MODEL, PROXY, fake_config
from tests.hosts.test_codex_over_ssh import left_on_hosts, remote_descendants
from tests.hosts.test_fleet_e2e import Watch, _issues, _send
from tests.real_programs import require_opencode
from tests.scheduler.test_usage_restart_e2e import REPO, _kill, _start

pytestmark = [pytest.mark.real_opencode, pytest.mark.slow]


def _workflow(fleet, model_url: str, oc_bin: Path, remote_root: Path) -> str:
    # JSON is YAML: the provider config's quotes need no escaping this way.
    front = {
        "tracker": {
            "kind": "local",
            "path": "issues.yaml",
            "active_states": ["Todo", "In Progress"],
            "terminal_states": ["Done"],
        },
        "polling": {"interval_ms": 500},
        "workspace": {"root": "local-workspaces"},
        "agent": {
            "backend": "opencode",
            "max_turns": 3,
            "max_concurrent_agents": 4,
            "max_retry_backoff_ms": 2000,
            "approvals": "auto",
        },
        "opencode": {
            "command": f"{oc_bin} serve",
            "model": FAKE_MODEL,
            "startup_timeout_ms": 120_000,
            "env": {
                "OPENCODE_CONFIG_CONTENT": json.dumps(fake_config(model_url)),
                "HTTP_PROXY": PROXY,
                "HTTPS_PROXY": PROXY,
                "NO_PROXY": "127.0.0.1,localhost",
            },
        },
        "worker": {
            "ssh_hosts": fleet.names,
            "max_concurrent_agents_per_host": 1,
            "workspace_root": str(remote_root),
        },
    }
    return f"---\n{json.dumps(front, indent=1)}\n---\nWork on {{{{ issue.identifier }}}}. {{{{ issue.description }}}}\n"


def test_opencode_runs_on_both_hosts_and_stop_and_interrupt_leave_nothing(tmp_path, fleet) -> None:
    oc_bin = require_opencode()
    project = tmp_path / "project"
    project.mkdir()
    remote_root = tmp_path / "remote-ws"
    with FakeModelServer(slow_delay=0.1) as model:
        (project / "WORKFLOW.md").write_text(_workflow(fleet, model.url, oc_bin, remote_root))
        (project / "issues.yaml").write_text(_issues(2, "SLOW3000 take your time"))
        env = {
            **os.environ,
            "HOME": str(tmp_path / "home"),
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            **fleet.env,
        }
        env.pop("XDG_STATE_HOME", None)
        env["SYMPHONY_PYTHON"] = sys.executable
        proc, url = _start(project, env)
        try:
            watch = Watch(url)
            snap = watch.until(
                lambda s: len([r for r in s["running"] if r.get("turn_count", 0) >= 1]) == 2,
                "both issues streaming, one per host",
                timeout=180,
            )
            on_host = {r["issue_id"]: r["host"] for r in snap["running"]}
            assert set(on_host.values()) == set(fleet.names)
            deadline = time.monotonic() + 60
            while len(model.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(model.requests) >= 2, "the servers on the hosts never reached the model"
            assert remote_descendants(fleet), "no server process on the hosts"
            for ident in ("FL-1", "FL-2"):
                server = remote_root / ident / ".symphony" / "opencode" / "server.log"
                assert server.is_file(), f"{ident}'s server did not run in its workspace"
            first, second = sorted(on_host)
            assert _send(url, {"type": "stop", "issue_id": first})["ok"]
            assert _send(url, {"type": "interrupt", "issue_id": second})["ok"]
            watch.until(lambda s: not s["running"], "both runs ended", timeout=60)
            assert left_on_hosts(fleet, 20) == []
            assert not (project / "local-workspaces").exists()  # nothing ran here
        finally:
            _kill(proc)
