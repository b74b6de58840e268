"""Every GraphQL document the Linear tracker sends (spec §11.2).

Query construction stays in this one module so schema drift shows up in one place: the test
``tests/trackers/linear/test_linear_schema_validation.py`` validates each document in
:data:`ALL_DOCUMENTS` against Linear's public schema (vendored with the test fakes, in
``testing/src/symphony_tui_testing/data/linear_schema.graphql``) and scans the package source
so a document defined anywhere else cannot slip past it.

Shapes follow the spec: the project filter is on ``slugId``, the id refresh types its ids as
``[ID!]``, pages hold :data:`PAGE_SIZE` issues and carry ``pageInfo {hasNextPage endCursor}``.
Blockers come from ``inverseRelations`` (relations whose ``relatedIssue`` is this issue; the
relation's ``issue`` is the blocker when ``type`` is ``blocks``).
"""

from __future__ import annotations

PAGE_SIZE = 50
"""Issues per page and ids per refresh request (spec §11.2 default)."""

RELATION_PAGE_SIZE = 50
"""Inverse relations read per issue; more than this many blockers is not plausible."""

STATE_PAGE_SIZE = 250
"""Workflow states read per team when moving an issue (Linear's page maximum)."""

ISSUE_FIELDS = """
fragment SymphonyIssueFields on Issue {
  id
  identifier
  title
  description
  priority
  state {
    name
  }
  branchName
  url
  assignee {
    id
    displayName
  }
  labels {
    nodes {
      name
    }
  }
  inverseRelations(first: $relationFirst) {
    nodes {
      type
      issue {
        id
        identifier
        state {
          name
        }
      }
    }
  }
  createdAt
  updatedAt
}
"""

ISSUES_BY_PROJECT_AND_STATES = (
    """
query SymphonyLinearIssuesByStates(
  $projectSlug: String!
  $stateNames: [String!]!
  $first: Int!
  $relationFirst: Int!
  $after: String
) {
  issues(
    filter: { project: { slugId: { eq: $projectSlug } }, state: { name: { in: $stateNames } } }
    first: $first
    after: $after
  ) {
    nodes {
      ...SymphonyIssueFields
    }
    pageInfo {
      hasNextPage
      endCursor
    }
  }
}
"""
    + ISSUE_FIELDS
)
"""Candidates (active states) and startup cleanup (terminal states) of one project, paged."""

ISSUES_BY_IDS = (
    """
query SymphonyLinearIssuesByIds($ids: [ID!]!, $first: Int!, $relationFirst: Int!, $after: String) {
  issues(filter: { id: { in: $ids } }, first: $first, after: $after) {
    nodes {
      ...SymphonyIssueFields
    }
    pageInfo {
      hasNextPage
      endCursor
    }
  }
}
"""
    + ISSUE_FIELDS
)
"""Current state of running issues (reconciliation); at most :data:`PAGE_SIZE` ids a request."""

VIEWER = """
query SymphonyLinearViewer {
  viewer {
    id
  }
}
"""
"""The key's own user id, for ``tracker.assignee: me``."""

ISSUE_TEAM_STATES = """
query SymphonyLinearIssueTeamStates($id: String!, $stateFirst: Int!) {
  issue(id: $id) {
    id
    state {
      name
    }
    team {
      id
      states(first: $stateFirst) {
        nodes {
          id
          name
          type
        }
      }
    }
  }
}
"""
"""The workflow states an issue can move to (its team's), to look up a state id by name."""

MOVE_ISSUE = (
    """
mutation SymphonyLinearMoveIssue($id: String!, $stateId: String!, $relationFirst: Int!) {
  issueUpdate(id: $id, input: { stateId: $stateId }) {
    success
    issue {
      ...SymphonyIssueFields
    }
  }
}
"""
    + ISSUE_FIELDS
)
"""Move an issue to a workflow state by id; returns the issue as it is afterwards."""

COMMENT_PAGE_SIZE = 50
"""Comments read for a prompt that uses them: the newest this many, shown oldest first."""

ISSUE_COMMENTS = """
query SymphonyLinearIssueComments($id: String!, $commentLast: Int!) {
  issue(id: $id) {
    id
    comments(last: $commentLast) {
      nodes {
        id
        body
        createdAt
        url
        user {
          displayName
        }
        botActor {
          name
        }
      }
    }
  }
}
"""
"""An issue's comments, for a prompt that uses ``issue.comments``."""

ALL_DOCUMENTS: tuple[str, ...] = (
    ISSUES_BY_PROJECT_AND_STATES,
    ISSUES_BY_IDS,
    VIEWER,
    ISSUE_TEAM_STATES,
    MOVE_ISSUE,
    ISSUE_COMMENTS,
)
"""Every complete document above; the schema-validation test iterates this."""
