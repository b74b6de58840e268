"""``symphony-tui fleet --list``: each project's state once, as a table (no console).

It follows the targets as the console would for up to ``wait_s`` seconds (less once every
project is live, down, refused, config, lost, stopped or a duplicate of another), then
prints one line a project, by name (the console's order): name, link state, running,
retrying, approvals waiting (``-``: never heard from, so unknown), machine (``here``: this
one), where it is (:func:`where`) and the last error (a clean stop's reason; a
duplicate's: which project shows its scheduler). Exit 0 when every project is live (or
the duplicate of one), 1 otherwise (none found, or one is not)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import TextIO

from symphony_tui.domain.snapshot import ProjectRow
from symphony_tui.fleet.port import FleetPort
from symphony_tui.fleet.targets import Target
from symphony_tui.text import one_line

SETTLED = frozenset({"live", "down", "refused", "config", "lost", "stopped", "duplicate"})


async def settle(fleet: FleetPort, wait_s: float) -> tuple[ProjectRow, ...]:
    """Run ``fleet`` until every project settled (at least one second) or ``wait_s``."""
    runner = asyncio.create_task(fleet.run())
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        while loop.time() - start < wait_s:
            await asyncio.sleep(0.2)
            rows = fleet.snapshot().projects
            if loop.time() - start >= 1.0 and rows and all(r.link_state in SETTLED for r in rows):
                break
        return fleet.snapshot().projects
    finally:
        await fleet.close()
        runner.cancel()


def where(row: ProjectRow) -> str:
    """Where a project is, so that two of one folder name are told apart: a URL target's
    URL, else its workflow's path (on its machine), else its target as written."""
    if row.target.startswith(("http://", "https://")):
        return row.target
    return row.workflow_path or row.target


def table(rows: Sequence[ProjectRow]) -> list[str]:
    """The lines ``--list`` prints (every cell one line, without control characters)."""
    lines = [("PROJECT", "STATE", "RUNNING", "RETRYING", "APPROVALS", "MACHINE", "WHERE", "ERROR")]
    for row in sorted(rows, key=lambda r: r.name):
        known = row.heard or row.link_state == "live"
        said = row.error or row.stop_reason

        def count(n: int, known: bool = known) -> str:
            return str(n) if known else "-"

        lines.append(
            (
                one_line(row.name),
                row.link_state,
                count(row.running),
                count(row.retrying),
                count(row.approvals),
                one_line(row.machine or "here"),
                one_line(where(row)),
                one_line(said, 200) if said else "",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    ]


def list_once(targets: Sequence[Target], *, wait_s: float, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    rows = asyncio.run(settle(FleetPort(targets), wait_s))
    if not rows:
        out.write("no scheduler found\n")
        return 1
    for line in table(rows):
        out.write(line + "\n")
    return 0 if all(r.link_state in ("live", "duplicate") for r in rows) else 1
