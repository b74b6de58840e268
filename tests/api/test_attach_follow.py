"""End to end with real processes: a console attached by its scheduler's workflow follows
that scheduler when it is started again on another port (after SIGTERM and after
``kill -9``), its events carrying on in one order; one attached by the fixed address
watches that address (and says how to attach again to a scheduler started on another
port) and follows a scheduler started again there; one attached through ``ssh://`` (a
real sshd) finds its killed scheduler gone and follows it to its new port."""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil

import pytest

from symphony_tui.api import announce, discovery
from symphony_tui.api.attach import (
    Attachment,
    address_finder,
    host_finder,
    open_attach,
    workflow_attachment,
    workflow_finder,
)
from symphony_tui.api.follow import FollowingPort
from symphony_tui.api.ssh import parse_target
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.status import link_text, stopped_text
from tests.api.remote_scheduler import HeadlessScheduler, Sshd, issues_yaml

pytestmark = pytest.mark.slow

SLOW = issues_yaml(2, "Steady work. [demo: slow, two-turns]")


async def until(predicate, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not predicate():
        if loop.time() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout}s")
        await asyncio.sleep(0.05)


def fixed_attachment(url: str) -> Attachment:
    """What ``symphony-tui attach http://...`` makes of a loopback address of this user's."""
    note = announce.note_for_port(announce.default_dir(), int(url.rsplit(":", 1)[1]))
    assert note is not None
    return Attachment(
        url,
        announce.read_token(note),
        "stream",
        owner=announce.Owner.of(announce.default_dir(), note["pid"]),
        pid=note["pid"],
    )


def said(event) -> tuple:
    """What an event says, its ``seq`` aside (a new port numbers it anew)."""
    return (event.at, event.kind, event.issue_id, event.message)


def still_shown(follow: FollowingPort, before: list, newer: list) -> None:
    """What the console showed before the restart (``before``) is still there after the
    move, first, then the new scheduler's (``newer``), each once: as the event log reads it
    again from the start (a filter set and cleared) and as an export reads it."""
    kept = follow.events_since(0)
    assert kept[: len(before)] == before
    assert kept[len(before) : len(before) + len(newer)] == newer
    assert len({said(e) for e in kept}) == len(kept)


async def test_a_console_attached_by_workflow_follows_its_restarted_scheduler(
    tmp_path, monkeypatch
):
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    sched = HeadlessScheduler(tmp_path, SLOW, state_home=state, speed="3")
    path = str(sched.workflow.resolve())
    follow = FollowingPort(
        workflow_attachment(discovery.workflow_endpoint(path)), workflow_finder(path), every_s=0.1
    )
    fixed = FollowingPort(
        fixed_attachment(sched.url), address_finder(sched.url), watching=sched.url, every_s=0.1
    )
    runs = [asyncio.create_task(follow.run()), asyncio.create_task(fixed.run())]
    try:
        await until(lambda: len(follow.events_since(0)) >= 5, 20, "the first scheduler's events")
        await until(lambda: fixed.link().state == "live", 10, "the fixed address live")
        # T-1's transcript, as its worker screen (or the /T-1 filter) reads it
        await until(lambda: follow.events_since(0, issue_id="t-1"), 10, "T-1's transcript")

        # a graceful stop, then the same workflow started again: another pid, another port
        old_url = sched.url
        sched.stop()
        await until(lambda: follow.stopped and fixed.stopped, 10, "both see the stop")
        assert follow.link().hint == "watching for it to start again"
        # it said it was stopping: its agents have ended, and no row says otherwise
        assert not follow.link().gone and follow.snapshot().running == ()
        watching = f"watching {old_url} for it to start there again"
        assert fixed.link().hint == f"{watching}; elsewhere, attach again: symphony-tui {path}"
        line = stopped_text(fixed.link(), fixed.link().stopped_at, Tones()).plain
        assert f" · {watching}; elsewhere, attach again: " in line and "\n" not in line
        before = follow.events_since(0)
        handed = before[-1].seq  # what the console was handed
        transcript = follow.events_since(0, issue_id="t-1")
        sched.restart()
        assert sched.url != old_url
        await until(lambda: follow.port.base_url == sched.url, 10, "followed to the new port")
        link = follow.link()
        assert link.state == "live" and not follow.stopped
        assert link.moved is not None and sched.url in link.moved
        assert sched.url in link_text(link, Tones()).plain
        assert fixed.stopped and fixed.port.base_url == old_url  # nothing at its address

        # the new scheduler's events come after what the console was handed, each once: the
        # history it hands back (its event file) is not shown again
        await until(lambda: follow.events_since(handed), 20, "the new scheduler's events")
        newer = follow.events_since(handed)
        seqs = [e.seq for e in newer]
        assert seqs == sorted(set(seqs)) and seqs[0] > handed
        assert not {said(e) for e in newer} & {said(e) for e in before}
        assert all(e.at and e.at > before[-1].at for e in newer if e.at)
        still_shown(follow, before, newer)
        # so is T-1's transcript, the new scheduler's after it (its own starts empty)
        await until(
            lambda: len(follow.events_since(0, issue_id="t-1")) > len(transcript),
            20,
            "T-1's transcript from the new scheduler",
        )
        again = follow.events_since(0, issue_id="t-1")
        assert again[: len(transcript)] == transcript
        assert transcript[-1].seq < again[len(transcript)].seq
        assert len({said(e) for e in again}) == len(again)

        # killed with -9 (its note stays behind), started again: followed again
        second = follow.port.base_url
        await until(lambda: follow.snapshot().running, 20, "agents running")
        sched.kill()
        await until(lambda: follow.stopped, 10, "the killed scheduler seen stopped")
        # gone without a word: its agents may still run, so its last rows stay (unknown)
        assert follow.link().gone
        kept = follow.snapshot()
        assert kept.running and kept.running == follow.port.before_stop.running
        assert kept.approvals == ()  # nothing there to answer them
        assert "gone" in stopped_text(follow.link(), follow.link().stopped_at, Tones()).plain
        before = follow.events_since(0)
        handed = before[-1].seq
        sched.restart()
        assert sched.url != second
        await until(lambda: follow.port.base_url == sched.url, 10, "followed after kill -9")
        await until(lambda: follow.events_since(handed), 20, "the third scheduler's events")
        newer = follow.events_since(handed)
        assert newer[0].seq > handed
        assert not {said(e) for e in newer} & {said(e) for e in before}
        assert follow.moves == 2
        still_shown(follow, before, newer)
    finally:
        await follow.close()
        await fixed.close()
        for task in runs:
            task.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        sched.stop()


async def test_a_console_attached_by_a_fixed_address_follows_a_scheduler_started_again_there(
    tmp_path, monkeypatch
):
    """``attach http://127.0.0.1:PORT``: once its scheduler stopped the console watches that
    address, still stopped while nothing answers there, and moves to the scheduler started
    again on the same port (after SIGTERM and after ``kill -9``), its events carrying on
    in one order, none shown twice."""
    from argparse import Namespace

    from symphony_tui.cli import _attached_port

    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    sched = HeadlessScheduler(tmp_path, SLOW, state_home=state, speed="3")
    url = sched.url
    attachment = await asyncio.to_thread(open_attach, url)
    follow = _attached_port(attachment, Namespace(url=url, ssh=None, api_port=None), None)
    assert follow.find is not None
    find, looks = follow.find, []

    def look(current):
        looks.append(current)
        return find(current)

    follow.find, follow.every_s = look, 0.1
    run = asyncio.create_task(follow.run())
    try:
        await until(lambda: len(follow.events_since(0)) >= 5, 20, "the first scheduler's events")
        assert follow.link().state == "live"

        sched.stop()
        await until(lambda: follow.stopped, 10, "the stop seen")
        assert (follow.link().hint or "").startswith(f"watching {url} for it to start there")
        await until(lambda: len(looks) >= 3, 10, "three looks at the address")
        assert follow.stopped and follow.moves == 0  # nothing answers there: still stopped
        before = follow.events_since(0)
        handed = before[-1].seq
        sched.restart(same_port=True)
        assert sched.url == url
        await until(lambda: follow.moves == 1, 20, "moved to the scheduler started there")
        link = follow.link()
        assert not follow.stopped and link.moved is not None and url in link.moved
        await until(lambda: follow.link().state == "live", 10, "live again")
        await until(lambda: follow.events_since(handed), 20, "the new scheduler's events")
        newer = follow.events_since(handed)
        seqs = [e.seq for e in newer]
        assert seqs == sorted(set(seqs)) and seqs[0] > handed
        assert not {said(e) for e in newer} & {said(e) for e in before}
        still_shown(follow, before, newer)

        # killed with -9 (its note stays behind), started again on the same port
        sched.kill()
        await until(lambda: follow.stopped, 10, "the killed scheduler seen stopped")
        before = follow.events_since(0)
        handed = before[-1].seq
        sched.restart(same_port=True)
        await until(lambda: follow.moves == 2, 20, "moved after kill -9")
        await until(lambda: follow.events_since(handed), 20, "the third scheduler's events")
        newer = follow.events_since(handed)
        assert newer[0].seq > handed
        assert not {said(e) for e in newer} & {said(e) for e in before}
        still_shown(follow, before, newer)
    finally:
        await follow.close()
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        attachment.close()
        sched.stop()


@pytest.mark.skipif(
    shutil.which("sshd") is None and not os.path.exists("/usr/sbin/sshd"),
    reason="openssh-server is not installed (.ci/run installs it)",
)
async def test_a_console_attached_over_ssh_follows_its_scheduler_killed_and_started_again(
    tmp_path, monkeypatch
):
    state = tmp_path / "state"
    sched = HeadlessScheduler(tmp_path, SLOW, state_home=state, speed="3")
    # SHLVL=1: the ssh session's bash skips this machine's slow .bashrc
    sshd = Sshd(tmp_path / "sshd", session_env={"XDG_STATE_HOME": str(state), "SHLVL": "1"})
    monkeypatch.setenv("SYMPHONY_SSH", sshd.ssh_command)
    target = f"ssh://{getpass.getuser()}@127.0.0.1:{sshd.port}"
    attachment = await asyncio.to_thread(open_attach, target)
    path = str(sched.workflow.resolve())
    assert attachment.workflow == path
    find = host_finder(parse_target(target), attachment.workflow)
    follow = FollowingPort(attachment, find, every_s=0.2, watch_lost=True)
    run = asyncio.create_task(follow.run())
    try:
        await until(lambda: follow.link().state == "live", 20, "live through the forward")
        # kill -9: no stopping frame, and the forward stays up, reaching nothing
        sched.kill()
        await until(lambda: follow.stopped, 20, "the killed scheduler seen stopped")
        assert "runs there now" in (follow.link().error or "")
        sched.restart()
        port = int(sched.url.rsplit(":", 1)[1])
        await until(lambda: follow.port.base_url.endswith(f":{port}"), 20, "followed over ssh")
        await until(lambda: follow.link().state == "live", 20, "live again")
        assert follow.moves == 1 and f"API port {port}" in (follow.link().moved or "")
    finally:
        await follow.close()
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        attachment.close()
        sched.stop()
        sshd.stop()


@pytest.mark.parametrize(
    ("url", "ssh", "api_port", "follows", "watching", "again"),
    [
        ("http://127.0.0.1:8080", None, None, True, "http://127.0.0.1:8080", None),
        ("ssh://me@box", None, None, True, None, None),
        (None, "me@box", None, True, None, None),
        ("ssh://me@box", None, 8080, False, None, "symphony-tui attach ssh://me@box"),
        (None, "me@box", 8080, False, None, "symphony-tui attach ssh://me@box"),
    ],
)
def test_attach_follows_a_scheduler_named_by_its_host_or_watches_its_address(
    url, ssh, api_port, follows, watching, again
):
    from argparse import Namespace

    from symphony_tui.cli import _attached_port

    attachment = Attachment("http://127.0.0.1:8080", None, "stream", workflow="/p/WORKFLOW.md")
    args = Namespace(url=url, ssh=ssh, api_port=api_port)
    port = _attached_port(attachment, args, None)
    assert isinstance(port, FollowingPort)
    assert (port.find is not None) == follows and port.watching == watching
    assert port.watch_lost == (follows and watching is None)
    assert port.again == again
