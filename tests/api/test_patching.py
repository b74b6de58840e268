"""The stream client's patch application (symphony_tui/api/patching.py): in place, and
re-validating only what a patch touched, it must give exactly what validating the whole
patched document gives."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import jsonpatch
import pytest

from symphony_tui.api.patching import PatchError, apply_change
from symphony_tui.domain import Snapshot
from symphony_tui.domain.approvals import ApprovalRequest
from symphony_tui.domain.kinds import ApprovalKind
from symphony_tui.domain.snapshot import IssueRow, RunningRow
from symphony_tui.domain.tokens import TokenUsage

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def running(n: int, turn: int = 1, message: str = "") -> RunningRow:
    return RunningRow(
        issue_id=f"i{n}", issue_identifier=f"A-{n}", state="Todo", turn_count=turn,
        last_message=message or None,
    )  # fmt: skip


def snapshot(rng: random.Random, step: int) -> Snapshot:
    """A snapshot whose rows come and go and change with ``step``."""
    ids = sorted(rng.sample(range(12), rng.randint(0, 8)))
    return Snapshot(
        generated_at=T0 + timedelta(seconds=step),
        seconds_running=float(step),
        issues=tuple(
            IssueRow(issue_id=f"i{n}", identifier=f"A-{n}", title=f"t{n}", state="Todo")
            for n in ids
        ),
        running=tuple(
            running(n, turn=rng.randint(1, 3), message=rng.choice(["", "x", "y"])) for n in ids
        ),
        approvals=tuple(
            ApprovalRequest(id=f"i{n}:1", issue_id=f"i{n}", kind=ApprovalKind.COMMAND)
            for n in ids[: rng.randint(0, 2)]
        ),
        totals=TokenUsage(total_tokens=rng.randint(0, 3) * 100),
        token_history=tuple(rng.randint(0, 9) for _ in range(rng.randint(0, 4))),
        dispatch_paused=rng.random() < 0.2,
        completed=tuple(f"c{n}" for n in range(rng.randint(0, 3))),
    )


def doc_of(snap: Snapshot) -> dict:
    return json.loads(snap.model_dump_json())


def test_a_chain_of_patches_gives_what_whole_validation_gives():
    rng = random.Random(7)
    held = snapshot(rng, 0)
    doc = doc_of(held)
    for step in range(1, 400):
        target = doc_of(snapshot(rng, step) if rng.random() < 0.5 else _nudged(held, rng, step))
        patch = jsonpatch.make_patch(doc, target).patch
        doc, held = apply_change(doc, held, patch)
        assert doc == target
        assert held == Snapshot.model_validate(target), patch


def _nudged(snap: Snapshot, rng: random.Random, step: int) -> Snapshot:
    """``snap`` with one running row's turn moved (a patch inside one row)."""
    if not snap.running:
        return snap.model_copy(update={"generated_at": T0 + timedelta(seconds=step)})
    rows = list(snap.running)
    i = rng.randrange(len(rows))
    rows[i] = rows[i].model_copy(update={"turn_count": rows[i].turn_count + 1})
    return snap.model_copy(update={"running": tuple(rows), "seconds_running": float(step)})


def test_rows_the_patch_did_not_touch_keep_their_identity():
    held = Snapshot(generated_at=T0, running=tuple(running(n) for n in range(5)))
    doc = doc_of(held)
    moved = held.model_copy(
        update={
            "generated_at": T0 + timedelta(seconds=1),
            "running": (*held.running[:2], running(2, turn=4), *held.running[3:]),
        }
    )
    doc, after = apply_change(doc, held, jsonpatch.make_patch(doc, doc_of(moved)).patch)
    assert after == moved
    assert [a is b for a, b in zip(after.running, held.running, strict=True)] == [
        True, True, False, True, True,
    ]  # fmt: skip
    assert after.issues is held.issues


def test_a_patch_that_does_not_apply_is_one_error():
    held = Snapshot(generated_at=T0)
    with pytest.raises(PatchError):
        apply_change(doc_of(held), held, [{"op": "replace", "path": "/running/3/x", "value": 1}])


def test_a_patch_that_breaks_a_row_fails_validation():
    held = Snapshot(generated_at=T0, running=(running(1),))
    bad = [{"op": "replace", "path": "/running/0/turn_count", "value": "many"}]
    with pytest.raises(ValueError, match="turn_count"):
        apply_change(doc_of(held), held, bad)
