"""Worker hosts end to end: a real ``symphony-tui --headless`` with two worker hosts (real
sshd on 127.0.0.1 and 127.0.0.2) running the simulated codex agent there: work spreads
over both, the per-host cap holds, a continuation goes back to its host, killing one
host's sshd mid-run fails its attempt over to the other, and nothing of a run is left on
either host afterwards."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from tests.control import control_headers
from tests.hosts.test_codex_over_ssh import left_on_hosts, remote_descendants
from tests.scheduler.test_usage_restart_e2e import REPO, _kill, _start

pytestmark = pytest.mark.slow

WORKFLOW = """\
---
tracker:
  kind: local
  path: issues.yaml
  active_states: [Todo, In Progress]
  terminal_states: [Done]
polling:
  interval_ms: 500
workspace:
  root: local-workspaces
agent:
  backend: codex
  max_turns: {max_turns}
  max_concurrent_agents: 6
  max_retry_backoff_ms: 2000
  approvals: auto
codex:
  command: {command}
  read_timeout_ms: 20000
  env:
    PYTHONPATH: {repo}
    SYMPHONY_PYTHON: $SYMPHONY_PYTHON
    SYMPHONY_DEMO_SPEED: $SYMPHONY_DEMO_SPEED
worker:
  ssh_hosts: {hosts}
  max_concurrent_agents_per_host: 1
  workspace_root: {root}
  down_backoff_ms: 1000
  down_backoff_max_ms: 4000
{worker_extra}---
Work on {{{{ issue.identifier }}}}. {{{{ issue.description }}}}
"""


def _issues(n: int, description: str) -> str:
    rows = "".join(
        f"  - id: fl-{i}\n    identifier: FL-{i}\n    title: Fleet {i}\n"
        f'    description: "{description}"\n    state: Todo\n'
        for i in range(1, n + 1)
    )
    return "issues:\n" + rows


def _get(url: str, path: str):
    with urllib.request.urlopen(f"{url}{path}", timeout=10) as response:
        return json.loads(response.read())


DEMO_COMMAND = """'"${SYMPHONY_PYTHON}" -m symphony_tui.demo.agent'"""


def _project(
    tmp_path: Path,
    fleet,
    *,
    max_turns: int,
    issues: str,
    speed: str,
    command: str = DEMO_COMMAND,
    worker_extra: str = "",
    hosts: list[str] | None = None,
):
    project = tmp_path / "project"
    project.mkdir()
    remote_root = tmp_path / "remote-ws"
    (project / "WORKFLOW.md").write_text(
        WORKFLOW.format(
            max_turns=max_turns,
            repo=REPO,
            hosts=json.dumps(hosts or fleet.names),
            root=remote_root,
            command=command,
            worker_extra=worker_extra,
        )
    )
    (project / "issues.yaml").write_text(textwrap.dedent(issues))
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "SYMPHONY_PYTHON": sys.executable,
        "SYMPHONY_DEMO_SPEED": speed,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        **fleet.env,
    }
    env.pop("XDG_STATE_HOME", None)
    return project, env, remote_root


class Watch:
    """Polls the snapshot and keeps what the test asserts on."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.max_per_host: dict[str, int] = {}
        self.hosts_seen: set[str] = set()
        self.local_runs = 0
        self.snap: dict = {}

    def poll(self) -> dict:
        snap = self.snap = _get(self.url, "/api/v1/snapshot")
        per: dict[str, int] = {}
        for row in snap["running"]:
            if row.get("host") is None:
                self.local_runs += 1
                continue
            per[row["host"]] = per.get(row["host"], 0) + 1
            self.hosts_seen.add(row["host"])
        for host, n in per.items():
            self.max_per_host[host] = max(self.max_per_host.get(host, 0), n)
        return snap

    def until(self, predicate, what: str, timeout: float = 120.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            snap = self.poll()
            if predicate(snap):
                return snap
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not reached; running={snap['running']}")
            time.sleep(0.1)


def _dispatch_hosts(project: Path) -> dict[str, list[str]]:
    """identifier -> the host of each of its dispatches, in order (the scheduler's log)."""
    out: dict[str, list[str]] = {}
    for line in (project / "logs" / "symphony.log").read_text().splitlines():
        if "msg=dispatch " not in line:
            continue
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        out.setdefault(fields["issue_identifier"], []).append(fields.get("host", "-"))
    return out


def _events(url: str) -> list[dict]:
    """Every event the scheduler kept, page after page (a page holds the first 2,000 after
    ``since``: a long run's late events would be missed on the first alone)."""
    out: list[dict] = []
    since = 0
    while True:
        got = _get(url, f"/api/v1/events?since={since}&limit=2000")
        page = got["events"] if isinstance(got, dict) else got
        out.extend(page)
        if len(page) < 2000:
            return out
        since = page[-1]["seq"]


def _done(n: int):
    return lambda snap: len(snap["completed"]) >= n and not snap["running"] and not snap["retrying"]


def test_work_spreads_over_both_hosts_within_their_caps_and_continues_at_home(
    tmp_path, fleet
) -> None:
    # max_turns 1 with two-turn issues: each first attempt ends normally with the issue
    # still active, so a continuation attempt follows, which must go to the same host.
    project, env, _ = _project(
        tmp_path, fleet, max_turns=1, issues=_issues(4, "[demo: two-turns]"), speed="0.3"
    )
    proc, url = _start(project, env)
    try:
        watch = Watch(url)
        snap = watch.until(_done(4), "all four issues done", timeout=240)
        assert watch.hosts_seen == set(fleet.names)
        assert watch.local_runs == 0
        assert all(n <= 1 for n in watch.max_per_host.values()), watch.max_per_host
        hosts = _dispatch_hosts(project)
        for identifier in ("FL-1", "FL-2", "FL-3", "FL-4"):
            seen = hosts[identifier]
            assert len(seen) >= 2, (identifier, seen)  # first attempt + continuation
            assert len(set(seen)) == 1, (identifier, seen)  # all on one host
        assert {h["name"] for h in snap["hosts"]} == set(fleet.names)
        assert all(h["up"] and h["running"] == 0 for h in snap["hosts"])
        assert not (project / "local-workspaces").exists()  # nothing ran here
        on_host = _get(url, "/api/v1/FL-1")
        assert on_host["workspace"]["host"] in fleet.names
    finally:
        _kill(proc)
    assert left_on_hosts(fleet, 5) == []


def test_killing_a_hosts_sshd_mid_run_fails_over_to_the_other(tmp_path, fleet) -> None:
    project, env, _ = _project(
        tmp_path, fleet, max_turns=3, issues=_issues(2, "[demo: slow, two-turns]"), speed="1"
    )
    proc, url = _start(project, env)
    try:
        watch = Watch(url)
        watch.until(
            lambda s: len([r for r in s["running"] if r.get("turn_count", 0) >= 1]) == 2,
            "both issues streaming, one per host",
        )
        victim = fleet.hosts[0]
        victim_run = next(r for r in watch.snap["running"] if r["host"] == victim.name)
        left = victim.kill()
        snap = watch.until(
            lambda s: any(h["name"] == victim.name and not h["up"] for h in s["hosts"]),
            "the killed host marked down",
            timeout=60,
        )
        down = next(h for h in snap["hosts"] if h["name"] == victim.name)
        assert down["last_error"] and "\n" not in down["last_error"]
        snap = watch.until(_done(2), "both issues done on the surviving host", timeout=240)
        hosts = _dispatch_hosts(project)
        moved = hosts[victim_run["issue_identifier"]]
        assert moved[0] == victim.name and moved[-1] == fleet.hosts[1].name, moved
        events = _events(url)
        assert any("host down" in (e.get("message") or "") for e in events) or any(
            f"worker host {victim.name} is down" in (e.get("message") or "") for e in events
        )
    finally:
        _kill(proc)
        for pid in left if "left" in dir() else []:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def _send(url: str, command: dict) -> dict:
    request = urllib.request.Request(
        f"{url}/api/v1/commands",
        data=json.dumps(command).encode(),
        headers={"Content-Type": "application/json", **control_headers(url)},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_stop_and_interrupt_leave_nothing_of_the_run_on_the_host(tmp_path, fleet) -> None:
    project, env, _ = _project(
        tmp_path, fleet, max_turns=5, issues=_issues(2, "[demo: slow, two-turns]"), speed="3"
    )
    proc, url = _start(project, env)
    try:
        watch = Watch(url)
        snap = watch.until(
            lambda s: len([r for r in s["running"] if r.get("turn_count", 0) >= 1]) == 2,
            "both issues streaming",
        )
        on_host = {r["issue_id"]: r["host"] for r in snap["running"]}
        assert set(on_host.values()) == set(fleet.names)
        assert remote_descendants(fleet), "no agent process on the hosts"
        first, second = sorted(on_host)
        assert _send(url, {"type": "stop", "issue_id": first})["ok"]
        assert _send(url, {"type": "interrupt", "issue_id": second})["ok"]
        watch.until(lambda s: not s["running"], "both runs ended", timeout=60)
        assert left_on_hosts(fleet, 15) == []
    finally:
        _kill(proc)
