"""GraphQL documents the GitHub tracker sends (GitHub GraphQL API, schema published as
``@octokit/graphql-schema``; tests validate every document here against it).

Documents with a board (``tracker.project``) read the status and priority through
``fieldValueByName``; the by-number refresh is built per batch with one aliased
``issue(number:)`` per issue (:func:`issues_by_numbers`), at most :data:`BATCH` a request.
:data:`ALL_DOCUMENTS` lists one instance of every shape, for the schema test.
"""

from __future__ import annotations

BATCH = 50
"""Issues per by-number refresh request (60 running issues: two requests)."""
PAGE_SIZE = 100
"""Board items per page (GitHub's maximum ``first``)."""
LABELS_FIRST = 50
ASSIGNEES_FIRST = 10
PROJECT_ITEMS_FIRST = 20

FIELD_VALUE = """
fragment SymphonyGitHubFieldValue on ProjectV2ItemFieldValue {
  __typename
  ... on ProjectV2ItemFieldSingleSelectValue { name optionId }
  ... on ProjectV2ItemFieldNumberValue { number }
  ... on ProjectV2ItemFieldTextValue { text }
}
"""

ISSUE_CORE = f"""
  number
  title
  body
  state
  url
  createdAt
  updatedAt
  labels(first: {LABELS_FIRST}) {{ nodes {{ name }} }}
  assignees(first: {ASSIGNEES_FIRST}) {{ nodes {{ login }} }}
"""


def _item_values(priority: bool) -> str:
    values = "status: fieldValueByName(name: $statusField) { ...SymphonyGitHubFieldValue }"
    if priority:
        values += (
            "\n      priority: fieldValueByName(name: $priorityField) "
            "{ ...SymphonyGitHubFieldValue }"
        )
    return values


def issue_fragment(board: bool, priority: bool) -> str:
    """``fragment SymphonyGitHubIssue on Issue``: the fields normalization reads, with the
    issue's board items (``projectItems``) when there is a board."""
    items = ""
    if board:
        items = (
            f"  projectItems(first: {PROJECT_ITEMS_FIRST}) {{ nodes {{ id project {{ id }}\n"
            f"      {_item_values(priority)} }} }}\n"
        )
    text = "fragment SymphonyGitHubIssue on Issue {" + ISSUE_CORE + items + "}\n"
    return text + (FIELD_VALUE if board else "")


def _variables(board: bool, priority: bool) -> str:
    out = "$owner: String!, $name: String!"
    if board:
        out += ", $statusField: String!"
    if priority:
        out += ", $priorityField: String!"
    return out


def issues_by_numbers(numbers: list[int], *, board: bool, priority: bool) -> str:
    """One query reading ``numbers`` (aliases ``i<number>``) of repository ``$owner/$name``."""
    aliases = "\n    ".join(
        f"i{n}: issue(number: {int(n)}) {{ ...SymphonyGitHubIssue }}" for n in numbers
    )
    return (
        f"query SymphonyGitHubIssuesByNumber({_variables(board, priority)}) {{\n"
        f"  repository(owner: $owner, name: $name) {{\n    {aliases}\n  }}\n}}\n"
        + issue_fragment(board, priority and board)
    )


BOARD = """
query SymphonyGitHubBoard($owner: String!, $number: Int!, $statusField: String!) {
  repositoryOwner(login: $owner) {
    ... on ProjectV2Owner {
      projectV2(number: $number) {
        id
        title
        field(name: $statusField) {
          ... on ProjectV2SingleSelectField { id name options { id name } }
        }
      }
    }
  }
}
"""
"""The board's id and its status field's options (read once, again after a failed move)."""

PRIORITY_FIELD = """
query SymphonyGitHubPriorityField($projectId: ID!, $priorityField: String!) {
  node(id: $projectId) {
    ... on ProjectV2 {
      field(name: $priorityField) {
        __typename
        ... on ProjectV2SingleSelectField { id name options { id name } }
        ... on ProjectV2Field { id name dataType }
      }
    }
  }
}
"""
"""The priority field: single-select options rank 1.. in board order, or a number field."""


def board_items(priority: bool) -> str:
    """A page of the board's items: issue number and repository, status, priority."""
    variables = "$projectId: ID!, $first: Int!, $after: String, $statusField: String!"
    if priority:
        variables += ", $priorityField: String!"
    return (
        f"""
query SymphonyGitHubBoardItems({variables}) {{
  node(id: $projectId) {{
    ... on ProjectV2 {{
      items(first: $first, after: $after) {{
        pageInfo {{ hasNextPage endCursor }}
        nodes {{
          id
          content {{ __typename ... on Issue {{ number repository {{ nameWithOwner }} }} }}
          {_item_values(priority)}
        }}
      }}
    }}
  }}
}}
"""
        + FIELD_VALUE
    )


SET_STATUS = """
mutation SymphonyGitHubSetStatus($projectId: ID!, $itemId: ID!, $fieldId: ID!, $optionId: String!) {
  updateProjectV2ItemFieldValue(
    input: {projectId: $projectId, itemId: $itemId, fieldId: $fieldId,
            value: {singleSelectOptionId: $optionId}}
  ) {
    projectV2Item { id }
  }
}
"""
"""Move an issue on the board: set its status field to another option."""

VIEWER = """
query SymphonyGitHubViewer {
  viewer { login }
}
"""
"""The token's own login (``tracker.assignee: me``)."""

ALL_DOCUMENTS: tuple[str, ...] = (
    VIEWER,
    issues_by_numbers([1, 2], board=False, priority=False),
    issues_by_numbers([1, 2], board=True, priority=False),
    issues_by_numbers([1, 2], board=True, priority=True),
    BOARD,
    PRIORITY_FIELD,
    board_items(False),
    board_items(True),
    SET_STATUS,
)
