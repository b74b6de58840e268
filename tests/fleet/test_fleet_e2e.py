"""End to end with real processes: five headless schedulers (demo agent), three on this
machine and two on sshd "hosts" (127.0.0.1 and 127.0.0.2) reached by ``ssh://``, in one
:class:`~symphony_tui.fleet.port.FleetPort`: approvals and interrupts across projects,
audited ``via fleet``; a wrong token is one line on its own row; a killed scheduler's row
is lost (not stopped: it said no word of a stop) and comes back live when it is started
again, its issue's transcript from before still read; the CLI's ``--list``. And beside
``local``, schedulers named by a workflow and a URL, killed and started again, are each
one project under its line's name, none of their events logged twice."""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from symphony_tui.domain import AgentEvent
from symphony_tui.domain.commands import Approve, Interrupt, PauseDispatch
from symphony_tui.fleet import targets as tg
from symphony_tui.fleet.port import FleetPort
from symphony_tui.scheduler.audit import local_operator
from tests.api.remote_scheduler import ROOT, HeadlessScheduler, Sshd, issues_yaml

pytestmark = pytest.mark.slow

needs_sshd = pytest.mark.skipif(
    shutil.which("sshd") is None and not os.path.exists("/usr/sbin/sshd"),
    reason="openssh-server is not installed (.ci/run installs it)",
)

APPROVAL = issues_yaml(1, "Release it. [demo: approval]")
SLOW = issues_yaml(1, "Steady work. [demo: slow, two-turns]")


async def until(predicate, timeout: float, what: str, fleet: FleetPort | None = None) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not predicate():
        if loop.time() - start > timeout:
            rows = fleet.snapshot().projects if fleet is not None else ()
            seen = [(r.name, r.link_state, r.error) for r in rows]
            raise AssertionError(f"{what}: not within {timeout}s; projects: {seen}")
        await asyncio.sleep(0.1)


def one_ssh_config(folder, *sshds: Sshd) -> str:
    """One client config trusting every sshd, each with its own key (``$SYMPHONY_SSH``)."""
    lines = []
    for sshd in sshds:
        config = sshd.ssh_command.split("-F ", 1)[1]
        lines.append(Path(config).read_text().replace("Host *", f"Host {sshd.address}", 1))
    path = folder / "ssh_config"
    path.write_text("".join(lines))
    return f"ssh -F {path}"


@needs_sshd
async def test_five_schedulers_two_over_ssh_in_one_fleet(tmp_path, monkeypatch):
    local = tmp_path / "state-local"
    monkeypatch.setenv("XDG_STATE_HOME", str(local))
    monkeypatch.setenv("FLEET_WRONG", "not-the-token")
    specs = {
        "alpha": (APPROVAL, local, {}),
        "beta": (SLOW, local, {}),
        "gamma": (SLOW, local, {"front_matter": "server:\n  auth_token_env: GAMMA_TOKEN\n"}),
        "delta": (APPROVAL, tmp_path / "state-a", {}),
        # a generated bearer token, kept in its state folder: read over ssh
        "epsilon": (
            SLOW,
            tmp_path / "state-b",
            {"front_matter": "server:\n  require_token: true\n"},
        ),
    }

    def start(name: str) -> HeadlessScheduler:
        issues, state, extra = specs[name]
        env = {"GAMMA_TOKEN": "the-real-token"} if name == "gamma" else None
        return HeadlessScheduler(
            tmp_path / name, issues, state_home=state, name=name, env_extra=env, **extra
        )

    t0 = time.monotonic()
    started = await asyncio.gather(*(asyncio.to_thread(start, n) for n in specs))
    scheds = dict(zip(specs, started, strict=True))
    # SHLVL=1: the ssh session's bash skips this machine's slow .bashrc
    sshd_a = Sshd(
        tmp_path / "sshd-a", session_env={"XDG_STATE_HOME": str(tmp_path / "state-a"), "SHLVL": "1"}
    )
    sshd_b = Sshd(
        tmp_path / "sshd-b",
        session_env={"XDG_STATE_HOME": str(tmp_path / "state-b"), "SHLVL": "1"},
        address="127.0.0.2",
    )
    monkeypatch.setenv("SYMPHONY_SSH", one_ssh_config(tmp_path, sshd_a, sshd_b))
    user = getpass.getuser()
    targets = [
        tg.parse(str(scheds["alpha"].workflow)),
        # a URL target is named by its address unless it says name=
        tg.parse(scheds["beta"].url, name="beta"),
        tg.parse(scheds["gamma"].url, name="gamma", token_env="FLEET_WRONG"),
        tg.parse(f"ssh://{user}@127.0.0.1:{sshd_a.port}"),
        tg.parse(f"ssh://{user}@127.0.0.2:{sshd_b.port}"),
    ]
    print(f"started in {time.monotonic() - t0:.1f}s")
    fleet = FleetPort(targets, ssh_retry_s=1.0, local_every_s=0.5)
    runner = asyncio.create_task(fleet.run())
    try:

        def rows():
            return {r.name: r for r in fleet.snapshot().projects}

        names = {"alpha", "beta", "gamma", "delta@127.0.0.1", "epsilon@127.0.0.2"}
        live = names - {"gamma"}
        await until(
            lambda: set(rows()) == names and all(rows()[n].link_state == "live" for n in live),
            60,
            "four projects live",
            fleet,
        )
        print(f"live in {time.monotonic() - t0:.1f}s")
        await until(lambda: rows()["gamma"].link_state == "refused", 20, "the wrong token refused")
        gamma = rows()["gamma"]
        assert gamma.error is not None and "401" in gamma.error and "\n" not in gamma.error
        assert rows()["delta@127.0.0.1"].machine == "127.0.0.1"

        # approvals of two projects (one over ssh), answered from the one fleet
        await until(
            lambda: {a.project for a in fleet.snapshot().approvals} >= {"alpha", "delta@127.0.0.1"},
            60,
            "an approval from alpha and from delta",
        )
        for approval in fleet.snapshot().approvals:
            assert approval.id.startswith(f"{approval.project}/")
            assert approval.issue_id.startswith(f"{approval.project}/")
            result = await fleet.send(Approve(approval_id=approval.id))
            assert result.ok, result.message
        await until(lambda: not fleet.snapshot().approvals, 30, "the approvals answered")
        print(f"approved in {time.monotonic() - t0:.1f}s")

        # interrupts of two projects' runs (one over ssh)
        await until(
            lambda: {r.project for r in fleet.snapshot().running} >= {"beta", "epsilon@127.0.0.2"},
            60,
            "runs in beta and epsilon",
        )
        running = {r.project: r for r in fleet.snapshot().running}
        for name in ("beta", "epsilon@127.0.0.2"):
            result = await fleet.send(Interrupt(issue_id=running[name].issue_id))
            assert result.ok, result.message
        refused = await fleet.send(Interrupt(issue_id="epsilon@127.0.0.2/no-such-issue"))
        assert not refused.ok and refused.message.startswith("epsilon@127.0.0.2: ")
        unrouted = await fleet.send(PauseDispatch())
        assert not unrouted.ok and "choose a project" in unrouted.message
        refused = await fleet.send(Interrupt(issue_id="gamma/t-1"))
        assert not refused.ok and refused.message.startswith("gamma: ")

        # the schedulers' own audit logs: who, and via fleet
        async with httpx.AsyncClient(base_url=scheds["beta"].url, timeout=10) as raw:
            entries = (await raw.get("/api/v1/audit")).json()["entries"]
        interrupt = [e for e in entries if e["what"] == "interrupt"]
        assert interrupt and interrupt[-1]["via"].startswith("fleet (HTTP API from ")
        assert interrupt[-1]["who"] == local_operator()
        audit = await fleet.audit_entries()
        assert any(
            e.what == "approve" and e.via.startswith("delta@127.0.0.1: fleet (HTTP API from")
            for e in audit
        )

        # events: one fleet sequence, every project in it
        events = fleet.events_since(0, limit=100_000)
        seqs = [e.seq for e in events]
        assert seqs == sorted(set(seqs))
        assert {e.project for e in events} >= live

        print(f"interrupted in {time.monotonic() - t0:.1f}s")
        # a killed scheduler (kill -9: no word of a stop): its row is lost, not stopped, and
        # keeps what it last said (its agents may still run); the others stay live; started
        # again: live
        alpha = scheds["alpha"]
        # its issue's transcript, as the worker screen reads it
        issue = next(r.issue_id for r in fleet.snapshot().issues if r.project == "alpha")
        await until(lambda: fleet.events_since(0, issue_id=issue), 10, "alpha's transcript")
        transcript = fleet.events_since(0, issue_id=issue)
        await asyncio.to_thread(alpha.kill)
        await until(lambda: rows()["alpha"].link_state == "lost", 20, "alpha lost")
        gone = rows()["alpha"]
        assert gone.stopped_with is None and gone.stop_reason is None
        assert gone.max_concurrent_agents > 0  # not zeroed as a stopped one's is
        # the row agrees with the panes, which keep its runs (read as unknown)
        shown = [r for r in fleet.snapshot().running if r.project == "alpha"]
        assert gone.running == len(shown)
        assert all(rows()[n].link_state == "live" for n in live - {"alpha"})
        killed_at = datetime.now(UTC)
        await asyncio.to_thread(alpha.restart)
        await until(lambda: rows()["alpha"].link_state == "live", 30, "alpha live again")
        assert set(rows()) == names

        # its history, handed back by the new process, is in the fleet's log once
        def alphas() -> list[AgentEvent]:
            return [e for e in fleet.events_since(0, limit=100_000) if e.project == "alpha"]

        await until(
            lambda: any(e.at and e.at > killed_at for e in alphas()), 30, "alpha's new events"
        )
        # its issue's transcript from before the kill is still read, each event once
        again = fleet.events_since(0, issue_id=issue)
        assert again[: len(transcript)] == transcript
        seqs = [e.seq for e in again]
        assert seqs == sorted(set(seqs))
        said = [(e.at, e.kind, e.issue_id, e.message) for e in alphas()]
        assert len(said) == len(set(said)), "a restarted scheduler's history taken twice"

        print(f"restarted in {time.monotonic() - t0:.1f}s")
        # the CLI's one-shot table, beside the running fleet
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        listed = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "symphony_tui.cli", "fleet", "--list", "--wait", "20"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        lines = listed.stdout.splitlines()
        assert lines[0].split()[:2] == ["PROJECT", "STATE"], listed.stderr
        table = {line.split()[0]: line.split()[1] for line in lines[1:]}
        # gamma's token is in its operator's variable, not in its note: refused, one line
        assert table == {"alpha": "live", "beta": "live", "gamma": "refused"}, listed.stdout
        assert listed.returncode == 1
        print(f"listed in {time.monotonic() - t0:.1f}s")

        # a clean stop (SIGTERM): it says so, its row is stopped, runs nothing, and is no error
        await asyncio.to_thread(scheds["beta"].stop)
        await until(lambda: rows()["beta"].link_state == "stopped", 30, "beta stopped", fleet)
        stopped = rows()["beta"]
        assert (stopped.running, stopped.retrying, stopped.approvals) == (0, 0, 0)
        assert stopped.error is None and stopped.stop_reason, stopped
        assert stopped.max_concurrent_agents == 0
    finally:
        await fleet.close()
        runner.cancel()
        sshd_a.stop()
        sshd_b.stop()
        await asyncio.gather(*(asyncio.to_thread(s.stop) for s in scheds.values()))
        print(f"ended in {time.monotonic() - t0:.1f}s")


async def test_a_named_scheduler_killed_and_started_again_is_one_project(tmp_path, monkeypatch):
    """A fleet of ``local``, a workflow named ``webf`` (the fleet file's ``~/web
    name=webf``) and a loopback URL named ``apiu``: each scheduler killed (``kill -9``) and
    started again, three times (the URL's on the same port), is never also a row of
    ``local`` (its folder's name), and no event of it is logged twice."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    web, api = await asyncio.gather(
        *(
            asyncio.to_thread(HeadlessScheduler, tmp_path, SLOW, state_home=state, name=name)
            for name in ("web", "api")
        )
    )
    targets = [
        tg.parse("local"),
        tg.parse(str(web.workflow), name="webf"),
        tg.parse(api.url, name="apiu"),
    ]
    fleet = FleetPort(targets, local_every_s=0.2)
    runner = asyncio.create_task(fleet.run())
    names: set[str] = set()  # every project name a row had, sampled as the console would

    async def watch() -> None:
        while True:
            names.update(r.name for r in fleet.snapshot().projects)
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())

    def states() -> dict[str, str]:
        return {r.name: r.link_state for r in fleet.snapshot().projects}

    try:
        both = {"webf": "live", "apiu": "live"}
        await until(lambda: states() == both, 60, "both live", fleet)
        for _ in range(3):
            await asyncio.gather(asyncio.to_thread(web.kill), asyncio.to_thread(api.kill))
            await until(lambda: states() == {"webf": "lost", "apiu": "lost"}, 20, "lost", fleet)
            await asyncio.sleep(1.0)  # several rounds of local's discovery
            await asyncio.gather(
                asyncio.to_thread(web.restart), asyncio.to_thread(api.restart, same_port=True)
            )
            await until(lambda: states() == both, 30, "both live again", fleet)
            await asyncio.sleep(1.0)  # several rounds of local's discovery
        events = fleet.events_since(0, limit=100_000)
        assert {e.project for e in events} == {"webf", "apiu"}
        said = [(e.project, e.at, e.kind, e.issue_id, e.message) for e in events]
        assert len(said) == len(set(said)), "an event logged twice"
        assert names == {"webf", "apiu"}
    finally:
        watcher.cancel()
        await fleet.close()
        runner.cancel()
        await asyncio.gather(asyncio.to_thread(web.stop), asyncio.to_thread(api.stop))
