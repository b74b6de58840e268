"""The scheduling rules of worker hosts without ssh (scheduler/worker_hosts/book.py):
least-loaded placement within each host's cap, an issue goes back to its workspace's
host, a down host takes nothing new, backs off doubling and comes back on a probe."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from symphony_tui.config.settings import Settings
from symphony_tui.domain import Issue
from symphony_tui.hosts.ssh import SshError
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.scheduler.worker_hosts.book import HostBook, HostProbes, host_down
from symphony_tui.workspaces.errors import WorkspaceError

HOSTS = ["a", "b", "c"]


def settings(**worker) -> Settings:
    return Settings.model_validate(
        {"worker": {"ssh_hosts": HOSTS, "max_concurrent_agents_per_host": 2, **worker}}
    )


def run_on(host: str | None, n: int) -> Run:
    issue = Issue(id=f"i-{host}-{n}", identifier=f"I-{n}", title="t", state="Todo")
    return Run(
        issue=issue,
        attempt=None,
        backend="codex",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        started_mono=0.0,
        last_event_mono=0.0,
        worker_host=host,
    )


def running(*hosts: str) -> dict[str, Run]:
    runs = [run_on(h, i) for i, h in enumerate(hosts)]
    return {r.issue.id: r for r in runs}


def test_the_least_loaded_host_with_room_first_listed_on_a_tie() -> None:
    book = HostBook(lambda: settings())
    assert book.place("x", {}) == "a"
    assert book.place("x", running("a")) == "b"
    assert book.place("x", running("a", "b")) == "c"
    assert book.place("x", running("a", "a", "b", "c")) == "b"
    assert book.place("x", running("a", "a", "b", "b", "c", "c")) is None  # all full


def test_per_host_overrides_of_the_cap() -> None:
    book = HostBook(lambda: settings(hosts={"a": {"max_concurrent_agents": 1}}))
    assert book.place("x", running("a")) == "b"
    assert [r.capacity for r in book.rows({})] == [1, 2, 2]


def test_an_issue_goes_back_to_its_workspaces_host_and_waits_for_room_there() -> None:
    book = HostBook(lambda: settings())
    book.placed("x", "c")
    assert book.place("x", running("a")) == "c"
    assert book.place("x", running("c", "c")) is None  # its host is full: it waits
    assert book.place("x", running("c", "c"), force=True) == "c"  # an operator's rerun
    book.forget("x")
    assert book.place("x", running("c", "c")) == "a"


def test_a_down_host_takes_nothing_and_its_issues_go_elsewhere() -> None:
    book = HostBook(lambda: settings(down_backoff_ms=1000, down_backoff_max_ms=3000))
    book.placed("x", "a")
    assert book.mark_down("a", "host a refused the connection", now_mono=10.0)
    assert not book.mark_down("a", "again", now_mono=10.0)  # already down
    assert book.place("x", {}) == "b" and book.place("y", {}) == "b"
    row = book.rows({})[0]
    assert (row.name, row.up, row.last_error) == ("a", False, "again")
    assert book.due_probes(10.5) == []
    assert book.due_probes(11.0) == ["a"]
    assert book.due_probes(11.0) == []  # being probed
    book.probe_failed("a", "still refused", 11.0)
    assert book.get("a").backoff_ms == 2000
    book.probe_failed("a", "still refused", 11.0)
    book.probe_failed("a", "still refused", 11.0)
    assert book.get("a").backoff_ms == 3000  # capped
    assert book.mark_up("a", 4.2) and book.place("x", {}) == "a"  # home again
    assert book.rows({})[0].rtt_ms == 4.2 and book.rows({})[0].up


def test_all_down_a_forced_run_still_gets_a_host() -> None:
    book = HostBook(lambda: settings())
    for name in HOSTS:
        book.mark_down(name, "down", 0.0)
    assert book.place("x", {}) is None
    assert book.place("x", {}, force=True) == "a"


def test_why_an_issue_waits_for_a_host_says_which_case_holds() -> None:
    book = HostBook(lambda: settings())
    full = running("a", "a", "b", "b", "c", "c")
    assert book.why_waiting("x", full) == "every worker host that is up is full (6/6)"
    book.placed("x", "c")
    assert book.why_waiting("x", full) == ("waiting for a slot on c, where its workspace is (2/2)")
    book.forget("x")
    book.drain("a", True)
    book.mark_down("b", "b refused", 0.0)
    book.mark_down("c", "c refused", 0.0)
    assert book.why_waiting("x", {}) == "every worker host that is up is drained"
    book.mark_down("a", "ssh: connect to host a port 22: Connection refused", 0.0)
    assert book.why_waiting("x", {}) == (
        "every worker host is down (a: ssh: connect to host a port 22: Connection refused)"
    )
    fresh = HostBook(lambda: settings())
    for host in fresh.hosts():
        host.reached = False
    assert fresh.why_waiting("x", {}) == "waiting for the worker hosts' first contact"


class _Worker:
    def __init__(self) -> None:
        self.stopped: list[Ending] = []

    @property
    def stopping(self) -> bool:
        return bool(self.stopped)

    def stop(self, ending: Ending, *, graceful: bool = False) -> bool:
        self.stopped.append(ending)
        return True


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class _State:
    def __init__(self, book: HostBook, runs: dict[str, Run]) -> None:
        self.hosts = book
        self.running = runs
        self.clock = _Clock()
        self.events: list[str] = []
        self.versions = 0

    def emit_system(self, kind, message, **kw) -> None:
        self.events.append(message)

    def log(self, level, msg, **fields) -> None:
        pass

    def changed(self) -> None:
        self.versions += 1


def test_host_down_ends_its_other_runs_with_the_reason() -> None:
    runs = running("a", "a", "b")
    for run in runs.values():
        run.worker = _Worker()
    state = _State(HostBook(lambda: settings()), runs)
    lost, other, elsewhere = runs.values()
    host_down(state, "a", "host a connection lost (ssh exit 255)", lost)
    assert lost.worker.stopped == [] and elsewhere.worker.stopped == []
    (ending,) = other.worker.stopped
    assert ending.error == "host down: host a connection lost (ssh exit 255)"
    assert other.host_lost and state.events == [
        "worker host a is down: host a connection lost (ssh exit 255)"
    ]


class _Loop:
    """A mailbox that applies each probe's outcome at once, as the loop does."""

    def __init__(self) -> None:
        self.probes: HostProbes | None = None

    def post(self, item, *, control: bool = False) -> None:
        assert self.probes is not None
        self.probes.probed(item)


def _probes(state, targets) -> HostProbes:
    loop = _Loop()
    loop.probes = HostProbes(state, targets, loop)
    return loop.probes


class _Target:
    def __init__(self, answers: list) -> None:
        self.answers = answers

    async def probe(self) -> float:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_probes_bring_a_host_back_once_its_backoff_ran_out() -> None:
    book = HostBook(lambda: settings(down_backoff_ms=1000))
    state = _State(book, {})
    target = _Target([SshError("refused", "a", "refused the connection"), 7.5])
    probes = _probes(state, lambda name: target)
    book.mark_down("a", "gone", state.clock.now)
    probes.tick()
    await asyncio.sleep(0)
    assert target.answers and not book.get("a").probing  # not due yet
    state.clock.now += 1.0
    probes.tick()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not book.get("a").up and book.get("a").last_error == "host a refused the connection"
    state.clock.now += 2.0
    probes.tick()
    for _ in range(5):
        await asyncio.sleep(0)
    assert book.get("a").up and book.get("a").rtt_ms == 7.5
    assert state.events == ["worker host a is up again (8 ms)"]
    probes.cancel()


def test_a_drained_host_takes_no_new_issue_but_its_workspaces_come_back_to_it() -> None:
    book = HostBook(lambda: settings())
    book.placed("home-on-a", "a")
    assert book.drain("a", True) and not book.drain("a", True)  # once
    assert book.place("new", {}) == "b"  # the least-loaded one would be a
    assert book.place("new", running("b")) == "c"
    assert book.place("new", running("b", "b", "c", "c")) is None  # a has room, but drained
    assert book.place("new", running("b", "b", "c", "c"), force=True) == "b"  # a rerun too
    # a continuation / retry of an issue whose workspace is on a goes on there
    assert book.place("home-on-a", running("a")) == "a"
    assert book.drain("a", False)
    assert book.place("new", {}) == "a"
    assert [r.drained for r in book.rows({})] == [False, False, False]


def test_an_issue_that_could_not_start_on_a_host_is_freed_from_it_and_goes_elsewhere() -> None:
    # A read-only or full disk there, or a missing program: retrying at home forever (and
    # on a drained home too) is what this prevents.
    book = HostBook(lambda: settings())
    book.placed("x", "a")
    assert book.drain("a", True)
    assert book.place("x", {}) == "a"  # its workspace's host, drained or not
    book.failed_there("x", "a")
    assert "x" not in book.home
    assert book.drain("a", False)
    assert book.place("x", {}) == "b"  # a is the least loaded, but x failed there
    book.placed("x", "b")
    book.failed_there("x", "b")
    assert book.place("x", running("c")) == "c"
    book.failed_there("x", "c")  # every host failed it: any host again, the last one last
    assert book.place("x", {}) == "a" and book.place("x", running("a")) == "b"
    book.forget("x")
    assert "x" not in book.avoid
    assert book.place("y", {}) == "a"  # other issues were never affected


def test_host_rows_say_since_when_drained_and_how_many_workspaces() -> None:
    from symphony_tui.domain import RecoveredWorkspace

    times = iter(datetime(2026, 1, 1, 10, m, tzinfo=UTC) for m in range(10))
    book = HostBook(lambda: settings(), now=lambda: next(times))
    first = book.rows({})[0].since  # listed: since the scheduler saw it
    book.placed("i-1", "a")
    book.drain("a", True)
    recovered = (
        RecoveredWorkspace(key="I-1", path="/w/I-1", host="a", issue_id="i-1"),  # the same
        RecoveredWorkspace(key="I-9", path="/w/I-9", host="a"),
        RecoveredWorkspace(key="I-8", path="/w/I-8"),  # here, not on a host
    )
    book.mark_down("a", "refused", 0.0)
    a = book.rows({}, recovered)[0]
    assert (a.drained, a.up, a.workspaces) == (True, False, 2)
    assert a.since is not None and first is not None and a.since > first
    down_since = a.since
    book.mark_up("a", 3.0)
    assert book.rows({})[0].since > down_since
    assert book.rows({}, recovered)[1].workspaces == 0


def test_probe_now_moves_a_down_hosts_probe_forward() -> None:
    book = HostBook(lambda: settings(down_backoff_ms=60_000))
    assert not book.probe_now("a", 1.0)  # up: nothing to probe
    book.mark_down("a", "refused", 0.0)
    assert book.due_probes(1.0) == []
    assert book.probe_now("a", 1.0)
    assert book.due_probes(1.0) == ["a"]
    assert not book.probe_now("a", 1.0)  # being probed


async def test_start_up_reaches_hosts_in_the_background_and_they_take_no_work_till_then() -> None:
    book = HostBook(lambda: settings(down_backoff_ms=1000))
    state = _State(book, {})
    answers = {"a": _Target([5.0]), "b": _Target([SshError("timeout", "b", "did not answer")])}
    answers["c"] = _Target([6.0])
    gate = asyncio.Event()
    reached: list[str] = []

    async def on_reached(name: str) -> None:
        if name == "c":
            raise WorkspaceError(
                "workspace_host_unreachable",
                "end leftover processes: lost",
                host_lost="host c is unreachable (lost again)",
            )
        await gate.wait()
        reached.append(name)

    probes = _probes(state, lambda name: answers[name])
    probes.start(on_reached)
    assert [(h.up, h.reached) for h in book.hosts()] == [(True, False)] * 3  # not down
    assert book.place("i-1", {}) is None  # nothing is placed before a host answered
    assert book.place("i-1", {}, force=True) == "a"  # (a rerun still gets one)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not book.get("a").reached  # answered, but its leftovers are not ended yet
    assert book.place("i-1", {}) is None
    gate.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert reached == ["a"] and book.get("a").up and book.place("i-1", {}) == "a"
    assert book.get("b").last_error == "host b did not answer" and not book.get("b").probing
    assert book.get("c").last_error == "host c is unreachable (lost again)"
    assert book.get("b").probe_at == state.clock.now + 1.0  # the backoff, not doubled
    assert state.events == [
        "worker host b is down: host b did not answer",
        "worker host c is down: host c is unreachable (lost again)",
    ]
    probes.cancel()
