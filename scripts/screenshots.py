"""Render README screenshots from a real demo run: SVG (Textual) and PNG (cairosvg).

    python scripts/screenshots.py [--out assets]

Runs ``symphony-tui demo`` in-process at 120x36, waits for live content (a pending approval,
finished runs), and saves the main screen, the approvals screen, a worker's detail, the
recovered workspaces screen and a workspace's diff.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

import cairosvg

from symphony_tui.cli import prepare_demo
from symphony_tui.console.app import SymphonyApp
from symphony_tui.runtime import build_runtime


async def wait_for(pilot, predicate, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("demo did not reach the expected state")
        await pilot.pause(0.1)


def save(app: SymphonyApp, out: Path, name: str) -> None:
    svg = app.export_screenshot(title=f"symphony_tui: {name}")
    (out / f"screenshot-{name}.svg").write_text(svg, encoding="utf-8")
    cairosvg.svg2png(bytestring=svg.encode(), write_to=str(out / f"screenshot-{name}.png"))
    print(f"saved {out / f'screenshot-{name}'}.{{svg,png}}")


async def main(out: Path) -> None:
    os.environ.setdefault("SYMPHONY_DEMO_SPEED", "1")
    workflow = prepare_demo()
    runtime = build_runtime(workflow, lock=False, events_path=workflow.parent / "events.jsonl")
    orch = runtime.orchestrator
    app = SymphonyApp(orch, runner=orch.run, shutdown=runtime.close, cursor_blink=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: bool(orch.snapshot().approvals))
        await wait_for(pilot, lambda: len(orch.snapshot().completed) >= 2)
        await pilot.press("2")
        await pilot.pause(0.6)
        save(app, out, "main")
        await pilot.press("v")
        await pilot.pause(0.6)
        save(app, out, "approvals")
        await pilot.press("escape")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(1.0)
        save(app, out, "worker")
        await pilot.press("escape")
        await pilot.pause(0.3)
        await pilot.press("w")
        await pilot.pause(0.6)
        save(app, out, "recovered")
        await pilot.press("escape")
        await pilot.pause(0.3)
        # the first worker's workspace diff
        await pilot.press("2", "equals_sign")
        await pilot.pause(0.3)
        await app.workers.wait_for_complete()
        await pilot.pause(0.6)
        save(app, out, "diff")
        await pilot.press("escape")
        await app.shutdown_and_exit(0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent.parent / "assets"
    )
    args = parser.parse_args()
    asyncio.run(main(args.out))
