"""Admission by memory on worker hosts, end to end: a real ``symphony-tui --headless``
with two sshd hosts (127.0.0.1, 127.0.0.2) running the simulated codex agent. One host's
floor (``worker.hosts.<h>.min_free_memory_mb``) is above its real free memory: no run
goes there, the issue that has nowhere else to go says why on its row, an event says the
host is short, and the other host's run shows its agent's memory from the host's own
sample. Lowering the floor in WORKFLOW.md lets the waiting issue start there."""

from __future__ import annotations

import json

import pytest

from tests.hosts.test_codex_over_ssh import left_on_hosts
from tests.hosts.test_fleet_e2e import Watch, _events, _issues, _project
from tests.scheduler.test_usage_restart_e2e import _kill, _start

pytestmark = pytest.mark.slow

HUGE_MB = 1_000_000_000


def _extra(host: str, floor_mb: int) -> str:
    return (
        "  resource_sample_ms: 200\n"
        "  hosts:\n"
        f"    {json.dumps(host)}:\n"
        f"      min_free_memory_mb: {floor_mb}\n"
    )


def test_a_host_under_its_memory_floor_takes_no_run_until_the_floor_is_lowered(
    tmp_path, fleet
) -> None:
    short, roomy = fleet.names
    project, env, _ = _project(
        tmp_path,
        fleet,
        max_turns=3,
        issues=_issues(2, "[demo: slow, two-turns]"),
        speed="1",
        worker_extra=_extra(short, HUGE_MB),
    )
    proc, url = _start(project, env)
    try:
        watch = Watch(url)

        def one_sampled_on_the_roomy_host(snap: dict) -> bool:
            rows = snap["running"]
            return len(rows) == 1 and rows[0]["host"] == roomy and bool(rows[0]["rss_bytes"])

        snap = watch.until(one_sampled_on_the_roomy_host, "a run sampled on the roomy host")
        running = snap["running"][0]["issue_id"]
        waiting = next(i for i in snap["issues"] if i["issue_id"] != running)

        def says_why(snap: dict) -> bool:
            row = next(i for i in snap["issues"] if i["issue_id"] == waiting["issue_id"])
            return row["note"].startswith(f"waiting for memory: host {short} has ")

        snap = watch.until(says_why, "the waiting issue's row says why")
        machines = {m["host"]: m for m in snap["memory"]}
        assert f"under the {HUGE_MB:,} MB floor" in machines[short]["short"]
        assert machines[roomy]["short"] is None
        assert machines[roomy]["agents_rss_bytes"] == snap["running"][0]["rss_bytes"]
        said = [e["message"] for e in _events(url) if "short of memory" in e["message"]]
        assert said and said[0].startswith(f"short of memory: host {short} has ")
        assert "no agent of ours runs there" in said[0]

        workflow = project / "WORKFLOW.md"
        workflow.write_text(workflow.read_text().replace(_extra(short, HUGE_MB), _extra(short, 0)))
        snap = watch.until(
            lambda s: any(r["host"] == short for r in s["running"]),
            "the waiting issue started on the host once its floor was lowered",
            timeout=120,
        )
        assert watch.max_per_host == {short: 1, roomy: 1}
    finally:
        _kill(proc)
    assert left_on_hosts(fleet, 5) == []
