"""A Projects (v2) board as the state: a board with 5 statuses, candidates from the board's
active statuses (issues off the board wait), priority from a single-select or number field,
blockers reported in their board status, moves through ``updateProjectV2ItemFieldValue``."""

from __future__ import annotations

import pytest

from symphony_tui.trackers.base import TrackerError

from .conftest import github_settings

STATUSES = ("Backlog", "Todo", "In Progress", "Human Review", "Done")


def board_settings(fake, **extra: object):
    return github_settings(
        fake,
        project={"number": 1, **extra},
        active_states=["Todo", "In Progress"],
        terminal_states=["Done"],
    )


async def test_board_with_five_states(fake, settings, tracker) -> None:
    fake.add_board(statuses=STATUSES, priority_field="Priority", priorities=["P0", "P1", "P2"])
    settings.value = board_settings(fake, priority_field="Priority")
    numbers = {s: fake.add_issue(f"in {s}", status=s) for s in STATUSES}
    off_board = fake.add_issue("not on the board")
    fake.set_priority(numbers["Todo"], "P2")
    fake.set_priority(numbers["In Progress"], "P0")
    candidates = await tracker.fetch_candidate_issues()
    assert [(i.id, i.state, i.priority) for i in candidates] == [
        (str(numbers["Todo"]), "Todo", 3),
        (str(numbers["In Progress"]), "In Progress", 1),
    ]
    everything = await tracker.fetch_issues_by_ids([str(n) for n in numbers.values()])
    assert [i.state for i in everything] == list(STATUSES)
    assert await tracker.fetch_issues_by_ids([str(off_board)]) == []
    done = await tracker.fetch_issues_by_states(["Done"])
    assert [i.id for i in done] == [str(numbers["Done"])]
    pages = fake.graphql_requests("SymphonyGitHubBoardItems")
    assert pages and all(r.body["variables"]["statusField"] == "Status" for r in pages)


async def test_board_items_page_past_100(fake, settings, tracker) -> None:
    fake.add_board(statuses=STATUSES)
    settings.value = board_settings(fake)
    todo = [fake.add_issue(f"t{i}", status="Todo") for i in range(130)]
    candidates = await tracker.fetch_candidate_issues()
    assert [i.id for i in candidates] == [str(n) for n in todo]
    cursors = [
        r.body["variables"]["after"] for r in fake.graphql_requests("SymphonyGitHubBoardItems")
    ]
    assert cursors == [None, "100"]


async def test_number_priority_field(fake, settings, tracker) -> None:
    fake.add_board(statuses=STATUSES, priority_field="Rank")
    settings.value = board_settings(fake, priority_field="Rank")
    n = fake.add_issue("ranked", status="Todo")
    fake.set_priority(n, 2, field_name="Rank")
    (issue,) = await tracker.fetch_candidate_issues()
    assert issue.priority == 2


async def test_blockers_carry_their_board_status(fake, settings, tracker) -> None:
    fake.add_board(statuses=STATUSES)
    settings.value = board_settings(fake)
    blocker = fake.add_issue("blocker", status="In Progress")
    finished = fake.add_issue("finished", status="Done", state="closed")
    waiting = fake.add_issue("waits", status="Todo")
    fake.block(waiting, blocker)
    fake.block(waiting, finished)
    issues = {i.id: i for i in await tracker.fetch_candidate_issues()}
    refs = {(b.identifier, b.state) for b in issues[str(waiting)].blocked_by}
    assert refs == {(f"GH-{blocker}", "In Progress"), (f"GH-{finished}", "Done")}


async def test_moves_set_the_status_field(fake, settings, tracker) -> None:
    fake.add_board(statuses=STATUSES)
    settings.value = board_settings(fake)
    n = fake.add_issue("to move", status="Todo")
    moved = await tracker.move_issue(str(n), "human review")
    assert moved.state == "Human Review" and fake.status(n) == "Human Review"
    assert fake.graphql_requests("SymphonyGitHubSetStatus")
    with pytest.raises(TrackerError) as info:
        await tracker.move_issue(str(n), "Shipped")
    assert info.value.category == "github_unknown_state"
    assert "Backlog, Todo" in info.value.message
    off = fake.add_issue("off the board")
    with pytest.raises(TrackerError) as info:
        await tracker.move_issue(str(off), "Todo")
    assert "not on the board" in info.value.message


async def test_unknown_board_is_one_line_error(fake, settings, tracker) -> None:
    settings.value = board_settings(fake)
    fake.add_issue("x")
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "github_unknown_project"


async def test_a_closed_issue_still_in_play_on_the_board_reads_closed(
    fake, settings, tracker
) -> None:
    fake.add_board(statuses=STATUSES)
    settings.value = board_settings(fake)
    running = fake.add_issue("closed by a person", status="In Progress")
    done = fake.add_issue("closed and done", status="Done")
    fake.close(running)
    fake.close(done)
    found = await tracker.fetch_issues_by_ids([str(running), str(done)])
    assert [i.state for i in found] == ["closed", "Done"]


async def test_config_problems_name_the_states_and_fields_the_board_lacks(
    fake, settings, tracker
) -> None:
    fake.add_board(statuses=STATUSES, priority_field="Priority", priorities=["P0", "P1"])
    settings.value = board_settings(fake, priority_field="Priority")
    assert await tracker.config_problems() == []
    settings.value = github_settings(
        fake,
        project={"number": 1, "priority_field": "Urgency"},
        active_states=["todo", "In Progres"],  # case does not matter; a typo does
        terminal_states=["Done"],
    )
    assert await tracker.config_problems() == [
        "tracker.active_states: 'In Progres' is not an option of the project's 'Status' field "
        "(options: Backlog, Todo, In Progress, Human Review, Done)",
        "tracker.project.priority_field: 'Urgency' is not found on the project "
        "(a single-select or number field is needed)",
    ]


async def test_a_number_priority_field_is_no_problem(fake, settings, tracker) -> None:
    fake.add_board(statuses=STATUSES, priority_field="Rank")
    settings.value = board_settings(fake, priority_field="Rank")
    assert await tracker.config_problems() == []


def test_doctor_fails_on_a_state_the_board_does_not_have(fake, tmp_path, monkeypatch) -> None:
    import io
    import textwrap

    from symphony_tui.doctor import run_doctor

    from .conftest import REPO, TOKEN

    fake.add_board(statuses=STATUSES)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    workflow = tmp_path / "WORKFLOW.md"
    workflow.write_text(
        textwrap.dedent(
            f"""\
            ---
            tracker:
              kind: github
              repo: {REPO}
              api_url: {fake.url}
              project: {{number: 1}}
              active_states: [Todo, Doing]
              terminal_states: [Done]
            workspace: {{root: {tmp_path / "ws"}}}
            codex: {{command: "true"}}
            ---
            Work on {{{{ issue.identifier }}}}
            """
        )
    )
    out = io.StringIO()
    code = run_doctor(str(workflow), out, timeout=10)
    lines = out.getvalue().splitlines()
    assert code == 1, out.getvalue()
    assert any(line.startswith("[ok  ] tracker: github: ") for line in lines)
    (states,) = [line for line in lines if "tracker states" in line]
    assert states.startswith("[FAIL] tracker states: tracker.active_states: 'Doing' is not")
