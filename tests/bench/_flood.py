"""A throw-away project for the end-to-end benchmarks: N local-tracker issues, the codex
backend launching :mod:`tests.bench.flood_agent`, and the real ``symphony-tui`` process
(headless with the HTTP API, or the console on a pseudo-terminal) under
:mod:`tests.bench.sched_host`.

Figures read from outside the scheduler process: CPU time and RSS from ``/proc/<pid>``,
GC pauses from the host's stats file, agent lines from the agents' report files.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symphony_tui.api.auth import CONTROL_HEADER, find_control_token
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parent / "flood_agent.py"
HOST = Path(__file__).resolve().parent / "sched_host.py"
CLK_TCK = os.sysconf("SC_CLK_TCK")
STAMP = re.compile(r"@(\d{9,11}\.\d+)")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads, not its children)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


@dataclass
class Api:
    """A keep-alive HTTP client for the scheduler's API (one per thread)."""

    port: int
    conn: http.client.HTTPConnection | None = None
    control: str | None = None  # the scheduler's control token, read once for a write

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
        """(status, decoded JSON body, seconds taken)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data else {}
        if method != "GET":
            self.control = self.control or find_control_token(self.port)
            headers.update({CONTROL_HEADER: self.control} if self.control else {})
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            t0 = time.perf_counter()
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
                continue
            took = time.perf_counter() - t0
            try:
                return resp.status, json.loads(raw or b"null"), took
            except ValueError:
                return resp.status, None, took
        raise AssertionError("unreachable")


@dataclass
class FloodProject:
    """``workers`` issues and an agent command; :meth:`start` launches the scheduler."""

    workers: int
    rate: float = 0.0  # lines/s per agent, 0 = as fast as the pipe takes them
    turn_s: float = 0.0
    #: Each turn lasts ``turn_s`` times a random factor within this fraction either side
    #: (``flood_agent.py --turn-jitter``).
    turn_jitter: float = 0.0
    approval_every_s: float = 0.0
    #: Each agent completes its streamed message this often with ``item_chars`` of text
    #: (0: one message per turn; ``flood_agent.py --item-every-s``).
    item_every_s: float = 0.0
    item_chars: int = 4000
    #: What a completed message says: ``words`` (one sentence repeated) or ``source``
    #: (this project's own source and docs; ``flood_agent.py --item-text``).
    item_text: str = "words"
    max_turns: int = 100
    issues: int | None = None
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="symphony-bench-")))
    port: int = field(default_factory=free_port)
    #: The tree whose code the scheduler runs (``ROOT``, or a checkout of an earlier commit
    #: for a before/after comparison in one run: :func:`checkout`).
    root: Path = ROOT
    #: Agents stream only once :attr:`go_file` exists (:meth:`go`); False: at once.
    gated: bool = False
    proc: subprocess.Popen[bytes] | None = None

    @property
    def reports(self) -> Path:
        return self.tmp / "reports"

    @property
    def go_file(self) -> Path:
        return self.tmp / "go"

    def go(self) -> None:
        """Let gated agents stream."""
        self.go_file.touch()

    @property
    def stats_file(self) -> Path:
        return self.tmp / "gc.json"

    def write(self) -> Path:
        self.reports.mkdir(parents=True, exist_ok=True)
        n = self.issues or self.workers
        lines = ["issues:"]
        for i in range(1, n + 1):
            lines += [
                f"  - id: flood-{i}",
                f"    identifier: FLOOD-{i}",
                f"    title: Flood {i}",
                "    state: Todo",
                f"    priority: {1 + i % 4}",
            ]
        (self.tmp / "issues.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        cmd = [sys.executable, str(AGENT), "--report", str(self.reports), "--rate", str(self.rate)]
        cmd += ["--turn-s", str(self.turn_s), "--approval-every-s", str(self.approval_every_s)]
        if self.turn_jitter > 0:
            cmd += ["--turn-jitter", str(self.turn_jitter)]
        if self.gated:
            cmd += ["--go-file", str(self.go_file)]
        if self.item_every_s > 0:
            cmd += ["--item-every-s", str(self.item_every_s), "--item-chars", str(self.item_chars)]
            cmd += ["--item-text", self.item_text]
        command = " ".join(shlex.quote(c) for c in cmd)
        front = f"""---
tracker:
  kind: local
  path: issues.yaml
  active_states: [Todo, In Progress]
  terminal_states: [Done, Cancelled]
polling:
  interval_ms: 1000
workspace:
  root: ws
agent:
  backend: codex
  max_concurrent_agents: {self.workers}
  max_turns: {self.max_turns}
  approvals: operator
  approval_timeout_ms: 3600000
codex:
  command: {json.dumps(command)}
  approval_policy: on-request
  read_timeout_ms: 120000
  stall_timeout_ms: 600000
  turn_timeout_ms: 3600000
---
You are working on issue {{{{ issue.identifier }}}}.
"""
        path = self.tmp / "WORKFLOW.md"
        path.write_text(front, encoding="utf-8")
        return path

    def host_argv(self, *, headless: bool = True, lock: bool = False) -> list[str]:
        """The scheduler's command line (``lock``: it takes the project's lock, so a second
        ``symphony-tui WORKFLOW.md`` attaches to it)."""
        workflow = self.write()
        # This tree's host by path (not ``-m``, which would find the checked-out tree's
        # under ``root``): the GC figures are measured alike for both sides of --before.
        argv = [sys.executable, str(HOST), str(self.stats_file), "--", str(workflow)]
        argv += ([] if lock else ["--no-lock"]) + ["--port", str(self.port)]
        argv += ["--log-dir", str(self.tmp / "logs")]
        return argv + (["--headless"] if headless else [])

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.root) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def start(self, *, lock: bool = False) -> subprocess.Popen[bytes]:
        self.proc = subprocess.Popen(
            self.host_argv(lock=lock),
            cwd=self.root,
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=open(self.tmp / "stderr.txt", "wb"),  # noqa: SIM115
            start_new_session=True,
        )
        return self.proc

    def wait_running(self, api: Api, want: int, timeout_s: float = 180.0) -> float:
        """Seconds until ``want`` runs show in ``/api/v1/state`` and their agents stream."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            try:
                status, body, _ = api.call("GET", "/api/v1/state")
            except OSError:
                time.sleep(0.2)
                continue
            streaming = len(list(self.reports.glob("*.jsonl")))
            if status == 200 and body["counts"]["running"] >= want and streaming >= want:
                return time.monotonic() - t0
            time.sleep(0.2)
        raise RuntimeError(f"only some of {want} runs started; see {self.tmp}/stderr.txt")

    def agent_lines(self) -> int:
        """Delta lines the agents report having written (all agents, dead ones included)."""
        total = 0
        for path in self.reports.glob("*.jsonl"):
            last = 0
            for line in path.read_text(encoding="utf-8").splitlines():
                if '"count"' in line:
                    try:
                        last = json.loads(line)["n"]
                    except (ValueError, KeyError):
                        pass
            total += last
        return total

    def agent_cpu_seconds(self) -> dict[int, float]:
        """CPU seconds (user + system) of each live agent process, by pid (the report
        files are named after them)."""
        out = {}
        for path in self.reports.glob("*.jsonl"):
            try:
                out[int(path.stem)] = cpu_seconds(int(path.stem))
            except (OSError, ValueError, IndexError):
                pass
        return out

    def agent_notes(self, kind: str) -> list[dict[str, Any]]:
        out = []
        for path in self.reports.glob("*.jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                if f'"{kind}"' in line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
        return out

    def gc_stats(self) -> dict[str, Any]:
        try:
            return json.loads(self.stats_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def stop(self, timeout_s: float = 120.0) -> float:
        """SIGTERM the scheduler; seconds until it exited (its agents are then gone too)."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        return time.monotonic() - t0

    def cleanup_agents(self) -> None:
        """Kill any agent left behind (each runs in its own process group), forget their
        reports."""
        for path in self.reports.glob("*.jsonl"):
            try:
                os.killpg(int(path.stem), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
            path.unlink(missing_ok=True)

    def cleanup(self) -> None:
        """Kill any agent left behind and remove the folder."""
        self.cleanup_agents()
        subprocess.run(["rm", "-rf", str(self.tmp)], check=False)


def checkout(ref: str) -> Path:
    """A throw-away copy of this repository's tree at ``ref`` (``git archive``), for running
    the scheduler of an earlier commit beside this tree's in the same bench run. The
    caller removes it (``shutil.rmtree``)."""
    dest = Path(tempfile.mkdtemp(prefix="symphony-before-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


class ConsoleOnPty:
    """The console (``symphony-tui`` without ``--headless``) of ``project`` on a pseudo-terminal
    of ``cols`` x ``rows``; a thread drains the screen output and counts its bytes. ``argv``:
    another command line for it (e.g. a console attaching to the project's running
    scheduler), and :attr:`FloodProject.proc` is left as it was."""

    def __init__(
        self,
        project: FloodProject,
        cols: int = 120,
        rows: int = 36,
        *,
        argv: list[str] | None = None,
    ) -> None:
        import fcntl
        import pty
        import struct
        import termios
        import threading

        self.project = project
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = project.env()
        env.update(TERM="xterm-256color", COLORTERM="truecolor", COLUMNS=str(cols), LINES=str(rows))
        self.proc = subprocess.Popen(
            argv or project.host_argv(headless=False),
            cwd=project.root,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        if argv is None:
            project.proc = self.proc
        os.close(slave)
        self.bytes = 0
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.bytes += len(chunk)
            self._took(chunk)

    def _took(self, chunk: bytes) -> None:
        """Each chunk the console wrote, after it was counted (nothing kept here)."""

    def press(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def quit(self, timeout_s: float = 120.0) -> float:
        """``q`` then ``y`` (the confirmation); seconds from the key to the process's exit."""
        t0 = time.monotonic()
        self.press(b"q")
        deadline = t0 + timeout_s
        answered = False
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            if not answered and time.monotonic() - t0 > 0.5:
                self.press(b"y")
                answered = True
        took = time.monotonic() - t0
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return float("inf")
        return took

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass
