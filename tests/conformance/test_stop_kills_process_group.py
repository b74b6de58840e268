"""Stop means stop: ending a worker kills the agent's whole process group (spec
§10.1 launch via ``bash -lc``). The agent is the demo agent behind the real codex
backend; its ``codex.command`` first starts a background ``sleep`` (a grandchild of the
scheduler) and a detached ``sleep`` in a subshell (re-parented to init, same group)."""

from __future__ import annotations

from pathlib import Path

from symphony_tui.domain.commands import Stop
from symphony_tui.runtime import build_runtime
from tests.helpers import until

from .conftest import child_env, issue, write_project


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] != "Z"


def read_pids(folder: Path, key: str) -> list[int]:
    return [int((folder / f"{key}.{name}").read_text()) for name in ("child", "detached")]


async def test_stop_and_shutdown_kill_the_agents_whole_process_tree(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    spawn = (
        f'key=$(basename "$PWD"); sleep 300 & echo $! > {pids}/$key.child; '
        f"( sleep 301 & echo $! > {pids}/$key.detached ); "
        'exec "$SYMPHONY_PYTHON" -m symphony_tui.demo.agent'
    )
    project = write_project(
        tmp_path / "project",
        [issue(1, description="[demo: approval]"), issue(2, description="[demo: approval]")],
        front=(
            "agent:\n  approvals: operator\n"
            f"codex:\n  command: '{spawn}'\n  read_timeout_ms: 10000\n"
        ),
    )
    runtime = build_runtime(
        project.workflow, env=child_env(), lock=False, events_path=tmp_path / "events.jsonl"
    )
    orch = runtime.orchestrator
    try:
        await orch.start()
        # Both agents are up and waiting on the operator: their trees are complete.
        await until(lambda: len(orch.snapshot().approvals) == 2)
        first, second = read_pids(pids, "CONF-1"), read_pids(pids, "CONF-2")
        assert {r.issue_identifier for r in orch.snapshot().running} == {"CONF-1", "CONF-2"}
        assert all(alive(p) for p in first + second)

        result = await orch.send(Stop(issue_id="c-1"))
        assert result.ok
        await until(lambda: "c-1" not in orch.running)
        await until(lambda: not any(alive(p) for p in first), timeout=20)
        assert all(alive(p) for p in second)  # the other worker is untouched
        assert (project.workspaces / "CONF-1").is_dir()  # stop keeps the workspace
        assert "c-1" in orch.held
    finally:
        await runtime.close()
    # Shutting the scheduler down ends the remaining worker's tree as well.
    await until(lambda: not any(alive(p) for p in second), timeout=20)
    assert not any(alive(p) for p in read_pids(pids, "CONF-1"))
