"""Draining a worker host, end to end: a real ``symphony-tui --headless`` with
two real sshd hosts. Draining the host that runs FL-1 (``POST /api/v1/commands
drain_host``) lets FL-1 go on there, its continuation included (its workspace is there),
while an issue that arrives afterwards runs only on the other host."""

from __future__ import annotations

import pytest

from tests.hosts.test_codex_over_ssh import left_on_hosts
from tests.hosts.test_fleet_e2e import (
    Watch,
    _dispatch_hosts,
    _done,
    _issues,
    _project,
    _send,
)
from tests.scheduler.test_usage_restart_e2e import _kill, _start

pytestmark = pytest.mark.slow


def _after_drain(project) -> list[str]:
    """Identifiers dispatched after the drain's log line, in order."""
    lines = (project / "logs" / "symphony.log").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "worker host drained" in line)
    out = []
    for line in lines[start:]:
        if "msg=dispatch " in line:
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            out.append(fields["issue_identifier"])
    return out


def test_a_drained_host_finishes_its_issues_and_takes_no_new_one(tmp_path, fleet) -> None:
    project, env, _ = _project(
        tmp_path, fleet, max_turns=1, issues=_issues(2, "[demo: slow, two-turns]"), speed="1"
    )
    proc, url = _start(project, env)
    try:
        watch = Watch(url)
        snap = watch.until(
            lambda s: len({r.get("host") for r in s["running"]}) == 2, "one issue on each host"
        )
        drained = next(r["host"] for r in snap["running"] if r["issue_identifier"] == "FL-1")
        other = next(n for n in fleet.names if n != drained)
        answer = _send(url, {"type": "drain_host", "host": drained})
        assert answer["ok"] and "drained" in answer["message"], answer
        issues = project / "issues.yaml"
        issues.write_text(
            issues.read_text()
            + "  - id: fl-3\n    identifier: FL-3\n    title: Fleet 3\n"
            + '    description: "[demo: two-turns]"\n    state: Todo\n'
        )
        snap = watch.until(_done(3), "all three issues done", timeout=300)
        hosts = _dispatch_hosts(project)
        assert set(hosts["FL-1"]) == {drained} and len(hosts["FL-1"]) >= 2, hosts
        assert "FL-1" in _after_drain(project)  # its continuation went on, on the drained host
        assert set(hosts["FL-3"]) == {other}, hosts
        assert watch.local_runs == 0
        rows = {h["name"]: h for h in snap["hosts"]}
        assert rows[drained]["drained"] and not rows[other]["drained"]
        assert rows[drained]["workspaces"] >= 1
    finally:
        _kill(proc)
    assert left_on_hosts(fleet, 5) == []
