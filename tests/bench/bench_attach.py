"""Attach figures: the bytes per second an attached console pulls from a scheduler's HTTP API,
at idle and with 50 busy workers, for the polling fallback, for the pushed stream as it
first shipped (``stream, before``: no compression, every token update sent) and for the stream
now (gzip per connection, token accounting coalesced to 1 s), side by side from one run.

The console side is a :class:`~symphony_tui.api.client.RemotePort` (what ``symphony-tui
attach`` runs); the bytes are counted by a TCP relay between it and the API server, so the
figure is what crosses the wire (headers and framing included)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import tempfile
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.api.client import RemotePort
from symphony_tui.api.server import ApiServer
from symphony_tui.api.stream import StreamHub
from symphony_tui.config.store import WorkflowStore
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.memory_tracker import MemoryTracker
from symphony_tui_testing.scripted_backend import ScriptedBackend
from tests.bench._common import figure
from tests.scheduler.conftest import make_issue, write_workflow

SECONDS = 6.0
EVENTS_PER_WORKER_S = 5


def _corpus() -> str:
    """Text that reads like an agent's: this project's own source and docs (about 1 MB), so
    the compressed figures are not flattered by a repeated message."""
    root = Path(__file__).resolve().parents[2]
    files = sorted([*root.joinpath("symphony_tui").rglob("*.py"), *root.glob("docs/*.md")])
    return " ".join(" ".join(f.read_text(encoding="utf-8").split()) for f in files)


CORPUS = _corpus()
_WORKERS = itertools.count()


async def busy(session, prompt, turn):
    """A worker that talks all the time: a message (about 80 characters of the corpus, each
    worker reading its own part), a streamed fragment (the next 40) and a token update per
    step, five steps a second, until interrupted."""
    at = next(_WORKERS) * 20_011 % len(CORPUS)
    step = 0
    while not session.interrupted.is_set():
        step += 1
        message, at = CORPUS[at : at + 80], (at + 120) % (len(CORPUS) - 120)
        fragment = CORPUS[max(at - 40, 0) : at]
        session.host.emit(AgentEvent(kind=EventKind.MESSAGE, message=f"{step}: {message}"))
        session.host.emit(AgentEvent(kind=EventKind.MESSAGE_DELTA, message=fragment))
        session.usage(1000 + step * 37, output=step * 5)
        await asyncio.sleep(1 / EVENTS_PER_WORKER_S)
    return TurnResult(TurnStatus.INTERRUPTED, session.turn_id, "interrupted")


async def idle(session, prompt, turn):
    return await session.wait_interrupt()


class Relay:
    """Forwards TCP from a local port to ``target``, counting bytes towards the client."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.down = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(src, dst, count: bool) -> None:
            try:
                while data := await src.read(65536):
                    if count:
                        self.down += len(data)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_w, False), pipe(up_r, writer, True))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()


def _build(root: Path, workers: int, script) -> Orchestrator:
    root.mkdir(parents=True, exist_ok=True)
    store = WorkflowStore(
        write_workflow(root, f"agent:\n  max_concurrent_agents: {max(workers, 1)}\n")
    )
    store.load_initial()
    return Orchestrator(
        store,
        MemoryTracker([make_issue(n) for n in range(max(workers, 1))]),
        WorkspaceManager(lambda: store.current.settings),
        lambda name: ScriptedBackend(script),
        watch_workflow=False,
    )


#: label -> (RemotePort mode, StreamHub options or None for the defaults)
MODES = {
    "poll": ("poll", None),
    "stream, before": ("stream", {"compress": False, "usage_s": 0.0}),
    "stream": ("stream", None),
}


async def measure(root: Path, workers: int, label: str) -> float:
    """Bytes/s a console attached as :data:`MODES` ``label`` receives over :data:`SECONDS`."""
    mode, options = MODES[label]
    orch = _build(root, workers, busy if workers else idle)
    if workers:
        await orch.tick()
    hub = StreamHub(orch, **options) if options is not None else None
    api = ApiServer(orch, bind_port=0, stream=hub)
    await api.start()
    relay = Relay(api.port)
    await relay.start()
    remote = RemotePort(f"http://127.0.0.1:{relay.port}", mode=mode, control=api.control_token)
    task = asyncio.create_task(remote.run())
    await asyncio.sleep(1.0)  # the first full snapshot is not the steady rate
    start = relay.down
    await asyncio.sleep(SECONDS)
    rate = (relay.down - start) / SECONDS
    await remote.close()
    task.cancel()
    await relay.stop()
    await api.stop()
    await orch.shutdown()
    return rate


async def main(root: Path) -> None:
    for label, workers in (("idle", 0), ("50 busy workers", 50)):
        rates = {}
        for mode in MODES:
            rates[mode] = await measure(
                root / f"{mode}-{workers}".replace(", ", "-"), workers, mode
            )
            figure(f"attach ({mode}), {label}", rates[mode] / 1000, "kB/s")
        for mode in ("stream, before", "stream"):
            figure(f"attach ({mode}) / poll, {label}", 100 * rates[mode] / rates["poll"], "%")


def run() -> None:
    logging.getLogger("symphony_tui").propagate = False
    print("== attach")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp)))


if __name__ == "__main__":
    run()
