"""A scripted stand-in for ``codex app-server`` (framing and edge-case tests).

Usage: ``python fake_app_server.py SCRIPT.json LOG.jsonl``. Every message the client sends
is appended to LOG.jsonl. SCRIPT is a list of steps, run in order:

* ``{"expect": METHOD, "result": {...}}`` - read until a client request METHOD arrives, then
  answer it with ``result`` (or ``"error": {...}``; or ``"no_reply": true``);
* ``{"expect_notification": METHOD}``;
* ``{"expect_response": ID}`` - read until the client answers our request ID;
* ``{"send": {...}}`` - write one JSON object as a line;
* ``{"raw": TEXT}`` - write TEXT as is (no newline added);
* ``{"big_line": N}`` - write a line of N bytes of junk plus a newline;
* ``{"sleep": SECONDS}``; ``{"stderr": TEXT}``; ``{"exit": CODE}``;
* ``{"spawn": CMD, "pid_file": PATH}`` - start ``CMD`` as a grandchild (same process group);
* ``{"hang": true}`` - read and log until stdin closes.

At the end of the script it keeps reading (and logging) until stdin closes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def main() -> None:
    with open(sys.argv[1]) as f:
        steps = json.load(f)
    log = open(sys.argv[2], "a", buffering=1)  # noqa: SIM115 - open for the whole run
    out = sys.stdout

    def write(text: str) -> None:
        out.write(text)
        out.flush()

    def read() -> dict | None:
        line = sys.stdin.readline()
        if not line:
            return None
        msg = json.loads(line)
        log.write(json.dumps(msg) + "\n")
        return msg

    def read_until(pred) -> dict | None:
        while True:
            msg = read()
            if msg is None or pred(msg):
                return msg

    for step in steps:
        if "expect" in step:
            msg = read_until(lambda m, s=step: m.get("method") == s["expect"] and "id" in m)
            if msg is None:
                sys.exit(3)
            if step.get("no_reply"):
                continue
            if "error" in step:
                write(json.dumps({"id": msg["id"], "error": step["error"]}) + "\n")
            else:
                write(json.dumps({"id": msg["id"], "result": step.get("result", {})}) + "\n")
        elif "expect_notification" in step:
            read_until(lambda m, s=step: m.get("method") == s["expect_notification"])
        elif "expect_response" in step:
            read_until(lambda m, s=step: m.get("id") == s["expect_response"] and "method" not in m)
        elif "send" in step:
            write(json.dumps(step["send"]) + "\n")
        elif "raw" in step:
            write(step["raw"])
        elif "big_line" in step:
            write("x" * step["big_line"] + "\n")
        elif "sleep" in step:
            time.sleep(step["sleep"])
        elif "stderr" in step:
            sys.stderr.write(step["stderr"] + "\n")
            sys.stderr.flush()
        elif "exit" in step:
            sys.exit(step["exit"])
        elif "spawn" in step:
            child = subprocess.Popen(step["spawn"], shell=True)
            with open(step["pid_file"], "w") as f:
                f.write(str(child.pid))
        elif step.get("hang"):
            break
    while read() is not None:
        pass


if __name__ == "__main__":
    main()
