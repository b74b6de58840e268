"""A scripted codex app-server for the benchmarks: streams agent-message deltas on stdout.

Run as a script (stdlib only, so the scheduler launches it as ``codex.command`` whatever
environment it gives agents)::

    python tests/bench/flood_agent.py --report DIR [--rate N] [--turn-s S]
        [--approval-every-s S] [--batch N]

It answers ``initialize``, ``thread/start``, ``thread/resume``, ``turn/start``,
``turn/interrupt`` and ``turn/steer`` the way ``codex app-server`` does (docs/protocols.md "Codex
app-server"), and while a turn runs writes ``item/agentMessage/delta`` notifications:

* ``--rate`` lines per second (0, the default: as fast as the pipe takes them; the pipe's
  back-pressure is then what paces the agent, so the figure is the scheduler's ceiling);
* each delta's text starts with ``@<epoch seconds>`` (the time the line was written), so the
  bench reads an agent's line-to-API latency from a worker's ``last_message``;
* ``--turn-jitter``: each turn lasts ``--turn-s`` times a random factor within this
  fraction either side (0.5: 0.5 to 1.5 times), so agents started together do not all end
  their turns together;
* ``--turn-s``: the turn completes after that many seconds (0: runs until interrupted);
* ``--go-file``: the first turn streams only once that file exists (the bench starts every
  run before any floods, so start-up is not measured under the flood);
* ``--item-every-s``: the streamed agent message completes that often (``item/completed``
  with ``--item-chars`` characters of text) and a new one starts, as an agent that finishes
  messages while it works (0, the default: one message for the whole turn);
* ``--approval-every-s``: sends ``item/commandExecution/requestApproval`` with the command
  ``flood-approve <n> <epoch seconds>`` that often (0: never), one at a time.

It appends JSON lines to ``DIR/<pid>.jsonl``: ``{"k": "count", "n": lines, "t": time}`` about
twice a second, ``{"k": "interrupt", "issue": ..., "t": ...}`` when a ``turn/interrupt``
arrives, ``{"k": "answer", "n": ..., "t": ...}`` when an approval is answered.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time
import uuid
from pathlib import Path

_IDENT = re.compile(r"working on issue ([A-Z]+-\d+)")


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = sys.stdout.buffer
        self.lock = threading.Lock()
        self.report = open(  # noqa: SIM115 - lives as long as the process
            os.path.join(args.report, f"{os.getpid()}.jsonl"), "a", encoding="utf-8"
        )
        self.thread_id = str(uuid.uuid4())
        self.turn_id: str | None = None
        self.issue = "?"
        self.turn_go = threading.Event()
        self.interrupted = threading.Event()
        self.count = 0
        self.approval_n = 0
        self.approval_pending = False
        self.next_rid = 1

    # -- output
    def send(self, msg: dict) -> None:
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        with self.lock:
            self.out.write(data)
            self.out.flush()

    def note(self, **fields) -> None:
        self.report.write(json.dumps(fields) + "\n")
        self.report.flush()

    # -- requests from the client (reader thread)
    def read(self) -> None:
        for raw in sys.stdin.buffer:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            method = msg.get("method")
            rid = msg.get("id")
            params = msg.get("params") or {}
            if method is None:  # a response to our approval request
                if self.approval_pending:
                    self.approval_pending = False
                    self.note(k="answer", n=self.approval_n, t=time.time())
                continue
            if rid is None:
                continue  # a notification (initialized)
            if method == "initialize":
                self.send({"id": rid, "result": {"userAgent": "flood/0", "platformOs": "linux"}})
            elif method in ("thread/start", "thread/resume"):
                self.send({"id": rid, "result": {"thread": {"id": self.thread_id}}})
            elif method == "turn/start":
                for part in params.get("input") or []:
                    m = _IDENT.search(str(part.get("text", "")))
                    if m:
                        self.issue = m.group(1)
                self.turn_id = str(uuid.uuid4())
                self.interrupted.clear()
                self.send({"id": rid, "result": {"turn": {"id": self.turn_id}}})
                self.turn_go.set()
            elif method == "turn/interrupt":
                self.note(k="interrupt", issue=self.issue, t=time.time())
                self.send({"id": rid, "result": {}})
                self.interrupted.set()
            elif method == "turn/steer":
                self.send({"id": rid, "result": {"turnId": self.turn_id}})
            else:
                self.send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})
        os._exit(0)

    # -- the turn (main thread)
    def turn(self) -> None:
        a = self.args
        tid, uid = self.thread_id, self.turn_id
        item = "msg_" + uuid.uuid4().hex
        self.send({"method": "turn/started", "params": {"threadId": tid, "turn": {"id": uid}}})
        head = self.start_item(item)
        while a.go_file and not os.path.exists(a.go_file) and not self.interrupted.is_set():
            time.sleep(0.1)
        start = time.time()
        turn_s = a.turn_s * random.uniform(1 - a.turn_jitter, 1 + a.turn_jitter)
        sent_at_report = 0.0
        next_approval = start + a.approval_every_s if a.approval_every_s > 0 else float("inf")
        next_item = start + a.item_every_s if a.item_every_s > 0 else float("inf")
        words = "the quick brown fox jumps over the lazy dog "
        batch = a.batch if a.rate <= 0 else max(1, min(a.batch, int(a.rate // 20)))
        per_batch_s = batch / a.rate if a.rate > 0 else 0.0
        due = start
        while not self.interrupted.is_set():
            now = time.time()
            if a.turn_s > 0 and now - start >= turn_s:
                break
            stamp = f"{now:.6f}"
            ms = int(now * 1000)
            tail = ' the quick brown fox "},"emittedAtMs":' + str(ms) + "}\n"
            lines = "".join(f"{head}{stamp} n={self.count + i}{tail}" for i in range(batch))
            with self.lock:
                self.out.write(lines.encode())
                self.out.flush()
            self.count += batch
            if now - sent_at_report >= 0.5:
                sent_at_report = now
                self.note(k="count", n=self.count, t=now)
            if now >= next_item:
                if a.item_text == "source":
                    text = f"message {self.count} " + source_window(self.count, a.item_chars)
                else:
                    text = f"message {self.count} " + words * (a.item_chars // len(words) + 1)
                self.complete_item(item, text[: a.item_chars])
                item = "msg_" + uuid.uuid4().hex
                head = self.start_item(item)
                next_item = now + a.item_every_s
            if now >= next_approval and not self.approval_pending:
                self.approval_n += 1
                self.approval_pending = True
                rid = f"ap{self.approval_n}"
                self.send(
                    {
                        "id": rid,
                        "method": "item/commandExecution/requestApproval",
                        "params": {
                            "threadId": tid,
                            "turnId": uid,
                            "itemId": f"cmd{self.approval_n}",
                            "command": f"flood-approve {self.approval_n} {time.time():.6f}",
                            "cwd": os.getcwd(),
                            "reason": "benchmark",
                        },
                    }
                )
                next_approval = now + a.approval_every_s
            if per_batch_s:
                due += per_batch_s
                pause = due - time.time()
                if pause > 0:
                    time.sleep(pause)
        self.note(k="count", n=self.count, t=time.time())
        status = "interrupted" if self.interrupted.is_set() else "completed"
        if status == "completed":
            self.complete_item(item, "flood turn done")
        self.send(
            {
                "method": "turn/completed",
                "params": {"threadId": tid, "turn": {"id": uid, "status": status}},
            }
        )

    def start_item(self, item: str) -> str:
        """Send ``item/started`` for agent message ``item``; the head of its delta lines."""
        tid, uid = self.thread_id, str(self.turn_id)
        self.send(
            {
                "method": "item/started",
                "params": {
                    "threadId": tid,
                    "turnId": uid,
                    "item": {"type": "agentMessage", "id": item, "text": ""},
                },
            }
        )
        return (
            '{"method":"item/agentMessage/delta","params":{"threadId":"'
            + tid
            + '","turnId":"'
            + uid
            + '","itemId":"'
            + item
            + '","delta":"@'
        )

    def complete_item(self, item: str, text: str) -> None:
        self.send(
            {
                "method": "item/completed",
                "params": {
                    "threadId": self.thread_id,
                    "turnId": str(self.turn_id),
                    "item": {"type": "agentMessage", "id": item, "text": text},
                },
            }
        )

    def main(self) -> None:
        threading.Thread(target=self.read, daemon=True).start()
        while True:
            self.turn_go.wait()
            self.turn_go.clear()
            self.turn()


_SOURCE: list[str] = []


def source_window(at: int, chars: int) -> str:
    """``chars`` characters of this project's own source and docs from offset ``at`` (mod
    its length): text that compresses like an agent's (about 2.5x with zlib), not a
    repeated sentence (70x)."""
    if not _SOURCE:
        root = Path(__file__).resolve().parents[2]
        files = sorted([*root.joinpath("symphony_tui").rglob("*.py"), *root.glob("docs/*.md")])
        _SOURCE.append("\n".join(f.read_text(encoding="utf-8") for f in files))
    text = _SOURCE[0]
    start = (at * 7919) % max(1, len(text) - chars)
    return text[start : start + chars]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--report", required=True)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--turn-s", type=float, default=0.0)
    p.add_argument("--turn-jitter", type=float, default=0.0)
    p.add_argument("--approval-every-s", type=float, default=0.0)
    p.add_argument("--item-every-s", type=float, default=0.0)
    p.add_argument("--item-chars", type=int, default=4000)
    p.add_argument("--item-text", choices=("words", "source"), default="words")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--go-file", default="")
    args = p.parse_args()
    try:
        Agent(args).main()
    except (BrokenPipeError, KeyboardInterrupt):
        os._exit(0)


if __name__ == "__main__":
    main()
