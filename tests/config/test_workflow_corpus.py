"""The compatibility corpus: one fixture per shape of WORKFLOW.md found in public files
written for the reference implementation and its ports (tests/data/workflow_corpus).

Each fixture loads, loads with its warning lines, or fails with its one line, as
``manifest.yaml`` says; each that loads renders its prompt for a sample issue of its
tracker, built by that tracker's own normalization (local file entry, Linear GraphQL node,
GitHub REST item, with comments as each tracker lists them). The figures (how many load,
with warnings, and why each other one does not) are printed in pytest's summary
(tests/config/conftest.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.prompt import SAMPLE_ISSUE, render_prompt
from symphony_tui.config.settings import Settings
from symphony_tui.config.workflow import Workflow, load_workflow
from symphony_tui.domain import Issue
from symphony_tui.trackers.github import normalize as github_normalize
from symphony_tui.trackers.linear import normalize as linear_normalize
from symphony_tui.trackers.local import parse_issues

from .corpus_report import CORPUS_REPORT

CORPUS = Path(__file__).resolve().parents[1] / "data" / "workflow_corpus"
MANIFEST: dict[str, dict[str, Any]] = yaml.safe_load((CORPUS / "manifest.yaml").read_text())[
    "files"
]
#: The environment the fixtures load in: none of their ``$VAR`` is set.
ENV: dict[str, str] = {}

LOCAL_ISSUES = """
issues:
  - id: corpus-1
    identifier: CORP-1
    title: Sample from a file
    state: Todo
    assignee: ana
    repository: corpus-owner/corpus-repo
    comments:
      - author: ana
        body: Please keep the old flag.
        created_at: 2026-01-02T10:00:00Z
"""

LINEAR_NODE = {
    "id": "9f1c-corpus",
    "identifier": "CORP-7",
    "title": "Sample from Linear",
    "description": "Linear description.",
    "priority": 2,
    "state": {"name": "Todo"},
    "branchName": "corp-7-sample",
    "url": "https://linear.app/corpus/issue/CORP-7",
    "assignee": {"id": "user-1", "displayName": "lin-user"},
    "labels": {"nodes": [{"name": "Bug"}, {"name": "backend"}]},
    "inverseRelations": {"nodes": []},
    "createdAt": "2026-01-01T08:00:00Z",
    "updatedAt": "2026-01-03T08:00:00Z",
}
LINEAR_COMMENTS = {
    "nodes": [
        {
            "id": "comment-7",
            "body": "Linear comment body.",
            "createdAt": "2026-01-03T09:00:00Z",
            "url": "https://linear.app/corpus/issue/CORP-7#comment-7",
            "user": {"displayName": "lin-user"},
            "botActor": None,
        }
    ]
}

GITHUB_ITEM = {
    "number": 12,
    "title": "Sample from GitHub",
    "body": "GitHub description.",
    "state": "open",
    "html_url": "https://github.com/corpus-owner/corpus-repo/issues/12",
    "labels": [{"name": "agent-ready"}],
    "assignees": [{"login": "octo-user"}],
    "created_at": "2026-01-01T08:00:00Z",
    "updated_at": "2026-01-02T08:00:00Z",
}
GITHUB_COMMENTS = [
    {
        "id": 501,
        "body": "GitHub comment body.",
        "user": {"login": "octo-user"},
        "created_at": "2026-01-02T09:00:00Z",
        "html_url": "https://github.com/corpus-owner/corpus-repo/issues/12#issuecomment-501",
    }
]


def sample_issue(settings: Settings) -> Issue:
    """An issue as the workflow's tracker would hand it to the prompt (comments included);
    :data:`SAMPLE_ISSUE` for trackers this implementation does not have."""
    kind = (settings.tracker.kind or "").strip().lower()
    if kind == "local":
        return parse_issues(Path("corpus-issues.yaml"), LOCAL_ISSUES)[0]
    if kind == "linear":
        issue = linear_normalize.normalize_issue(LINEAR_NODE)
        return issue.model_copy(
            update={"comments": linear_normalize.extract_comments(LINEAR_COMMENTS)}
        )
    if kind == "github":
        tracker = settings.tracker.model_copy(update={"repo": "corpus-owner/corpus-repo"})
        issue = github_normalize.from_rest(GITHUB_ITEM, tracker)
        assert issue is not None
        return issue.model_copy(
            update={"comments": github_normalize.comments_rest(GITHUB_COMMENTS)}
        )
    return SAMPLE_ISSUE


def outcome_of(path: Path) -> tuple[str, Workflow | None, str]:
    """``(outcome, workflow or None, detail)``: ``loads``/``warns`` with the warning lines
    joined, or ``fails`` with the error line."""
    try:
        workflow = load_workflow(path, env=ENV)
    except WorkflowError as err:
        return "fails", None, str(err)
    return ("warns" if workflow.warnings else "loads"), workflow, "\n".join(workflow.warnings)


def corpus_report() -> list[str]:
    """The figures and, for each file that does not load, why."""
    counts = {"loads": 0, "warns": 0, "fails": 0}
    failures = []
    for name in sorted(MANIFEST):
        outcome, _, detail = outcome_of(CORPUS / name)
        counts[outcome] += 1
        if outcome == "fails":
            failures.append(f"  {name}: {detail}")
    total = sum(counts.values())
    head = (
        f"{total} files: {counts['loads'] + counts['warns']} load "
        f"({counts['loads']} clean, {counts['warns']} with warnings), "
        f"{counts['fails']} do not:"
    )
    return [head, *failures]


def test_every_fixture_has_a_manifest_entry_and_back() -> None:
    on_disk = {p.name for p in CORPUS.glob("*.md") if p.name != "README.md"}
    assert on_disk == set(MANIFEST)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_fixture_outcome(name: str) -> None:
    expected = MANIFEST[name]
    outcome, workflow, detail = outcome_of(CORPUS / name)
    assert outcome == expected["outcome"], detail
    if outcome == "fails":
        assert detail == expected["error"]
        assert "\n" not in detail
        return
    assert workflow is not None
    assert list(workflow.warnings) == expected.get("warnings", [])
    issue = sample_issue(workflow.settings)
    for attempt in (None, 3):
        text = render_prompt(workflow.prompt_template, issue, attempt, workflow.prompt_first_line)
        assert text
        for wanted in expected.get("renders", []):
            assert wanted in text, text


def test_reference_files_load_without_variant_warnings() -> None:
    """Files in the reference's own keys and trackers load; none needs a port variant."""
    for name, entry in MANIFEST.items():
        if name.startswith("reference-"):
            assert entry["outcome"] in ("loads", "warns")
            assert all(w.startswith("unknown setting") for w in entry.get("warnings", []))


def test_corpus_report(request: pytest.FixtureRequest) -> None:
    lines = corpus_report()
    fails = [n for n, e in MANIFEST.items() if e["outcome"] == "fails"]
    assert lines[0].startswith(f"{len(MANIFEST)} files: {len(MANIFEST) - len(fails)} load")
    assert len(lines) == 1 + len(fails)
    request.config.stash[CORPUS_REPORT] = lines
    print("\n".join(lines))
