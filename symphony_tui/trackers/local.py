"""The local tracker: issues in a YAML file in the repository (no account needed).

File format::

    issues:
      - id: demo-1            # required
        identifier: DEMO-1    # required
        title: Write it       # required
        state: Todo           # required
        description: ...      # optional; also priority, labels, blocked_by, url,
                              # branch_name, created_at, updated_at, repository,
                              # assignee (or assignees: a list), comments (below)
        comments:             # optional, oldest first: a map per comment, or its text
          - author: ana
            body: Please keep the old flag.
            created_at: 2026-01-02T10:00:00Z   # optional, as are id and url

The file is re-read on every call (parsed again only when its bytes changed), so edits by
hand show up on the next poll. ``move_issue`` rewrites only the ``state:`` value (and an
existing ``updated_at:`` value) of one issue, byte for byte elsewhere, atomically, and
verifies the result by parsing it again. Concurrent writers (two tasks, or two processes
sharing the file) are serialized with an asyncio lock plus ``flock`` on the file's folder.
Every problem is ``TrackerError("local_tracker_file", <one line>)``: the file is one
document, so a malformed entry fails every read until it is fixed. ``dispatchable`` is false
for a ``Todo`` issue with a blocker that is not in a terminal state.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from symphony_tui.config.errors import describe_yaml_error, flatten_validation_error
from symphony_tui.config.settings import Settings
from symphony_tui.domain import BlockerRef, Issue, IssueComment
from symphony_tui.text import one_line
from symphony_tui.trackers.base import (
    TrackerError,
    TrackerProfile,
    dedupe_ids,
    todo_waits_for_blockers,
)
from symphony_tui.workspaces.atomic import ConcurrentEditError, atomic_write_bytes

CATEGORY = "local_tracker_file"
EDIT_RETRIES = 20
_REQUIRED = ("id", "identifier", "title", "state")
# libyaml when available: the file is parsed several times per move and on every change.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PLAIN_SAFE = re.compile(r"[A-Za-z][A-Za-z0-9 _.()/-]*")


def _fail(message: str) -> TrackerError:
    return TrackerError(CATEGORY, one_line(message))


def _scalar_text(value: Any) -> str | None:
    """A YAML scalar as text (ids may be written as numbers); None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int | float):
        return str(value)
    return None


def _entry_name(index: int, entry: Any) -> str:
    if isinstance(entry, dict):
        for key in ("identifier", "id"):
            text = _scalar_text(entry.get(key))
            if text:
                return f"issue #{index + 1} ({text})"
    return f"issue #{index + 1}"


def _load_yaml(path: Path, text: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        raise _fail(f"{path}: invalid YAML {describe_yaml_error(err)}") from err


def _entries(path: Path, data: Any) -> list[Any]:
    if data is None:
        return []
    if not isinstance(data, dict) or "issues" not in data:
        raise _fail(f"{path}: expected a map with an 'issues:' list at the top")
    entries = data["issues"]
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise _fail(f"{path}: 'issues' must be a list, got {type(entries).__name__}")
    return entries


def _string_list(path: Path, name: str, field: str, value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        text = _scalar_text(item)
        if text is None:
            raise _fail(f"{path}: {name}: {field} must be a list of names, got {item!r}")
        if text.strip():
            out.append(text.strip())
    return out


def _comments(path: Path, name: str, value: Any) -> tuple[IssueComment, ...]:
    """``comments:`` of one entry: a list of maps (``author``, ``body``, optional ``id``,
    ``created_at``, ``url``) or of plain texts (the body)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _fail(f"{path}: {name}: comments must be a list, got {type(value).__name__}")
    out = []
    for index, item in enumerate(value, 1):
        text = _scalar_text(item)
        if text is not None:
            out.append(IssueComment(body=text))
            continue
        if not isinstance(item, dict) or _scalar_text(item.get("body")) is None:
            raise _fail(f"{path}: {name}: comment {index} must be a text or a map with a body")
        try:
            out.append(
                IssueComment(
                    id=_scalar_text(item.get("id")),
                    author=_scalar_text(item.get("author")),
                    body=_scalar_text(item.get("body")),
                    created_at=item.get("created_at"),
                    url=_scalar_text(item.get("url")),
                )
            )
        except ValidationError as err:
            raise _fail(
                f"{path}: {name}: comment {index}: {flatten_validation_error(err)}"
            ) from err
    return tuple(out)


def parse_issues(path: Path, text: str) -> list[Issue]:
    """Validate and normalize the file's issues, in file order (see module docstring).
    Raises ``TrackerError("local_tracker_file")`` naming the offending entry."""
    raw: list[dict[str, Any]] = []
    seen_ids: dict[str, str] = {}
    seen_identifiers: dict[str, str] = {}
    for index, entry in enumerate(_entries(path, _load_yaml(path, text))):
        name = _entry_name(index, entry)
        if not isinstance(entry, dict):
            raise _fail(f"{path}: {name} must be a map, got {type(entry).__name__}")
        fields: dict[str, Any] = {}
        for key in _REQUIRED:
            value = _scalar_text(entry.get(key))
            if value is None or not value.strip():
                raise _fail(f"{path}: {name} is missing required field '{key}'")
            fields[key] = value.strip() if key != "title" else value
        if fields["id"] in seen_ids:
            raise _fail(f"{path}: {name} repeats id {fields['id']!r} of {seen_ids[fields['id']]}")
        if fields["identifier"] in seen_identifiers:
            raise _fail(
                f"{path}: {name} repeats identifier {fields['identifier']!r} "
                f"of {seen_identifiers[fields['identifier']]}"
            )
        seen_ids[fields["id"]] = name
        seen_identifiers[fields["identifier"]] = name
        priority = entry.get("priority")
        if isinstance(priority, bool) or not (priority is None or isinstance(priority, int)):
            if isinstance(priority, str) and priority.strip().isdigit():
                priority = int(priority)
            else:
                raise _fail(f"{path}: {name}: priority must be an integer or null")
        fields["priority"] = priority
        for key in ("description", "url", "branch_name", "created_at", "updated_at", "repository"):
            if entry.get(key) is not None:
                fields[key] = entry[key]
        fields["assignees"] = tuple(
            _string_list(path, name, "assignees", entry.get("assignees"))
            or _string_list(path, name, "assignee", entry.get("assignee"))
        )
        fields["comments"] = _comments(path, name, entry.get("comments"))
        fields["labels"] = tuple(
            label.lower() for label in _string_list(path, name, "labels", entry.get("labels"))
        )
        fields["_blocked_by"] = _string_list(path, name, "blocked_by", entry.get("blocked_by"))
        fields["_name"] = name
        raw.append(fields)

    by_ref: dict[str, dict[str, Any]] = {}
    for fields in raw:
        by_ref.setdefault(fields["id"], fields)
    for fields in raw:  # identifiers win over ids when both match
        by_ref[fields["identifier"]] = fields
    issues = []
    for fields in raw:
        blockers = []
        for ref in fields.pop("_blocked_by"):
            other = by_ref.get(ref)
            if other is None:
                blockers.append(BlockerRef(identifier=ref))
            else:
                blockers.append(
                    BlockerRef(id=other["id"], identifier=other["identifier"], state=other["state"])
                )
        name = fields.pop("_name")
        try:
            issues.append(Issue(**fields, blocked_by=tuple(blockers)))
        except ValidationError as err:
            raise _fail(f"{path}: {name}: {flatten_validation_error(err)}") from err
    return issues


LOCAL_PROFILE = TrackerProfile(
    kind="local",
    config=(
        "`tracker.path`: the YAML file (relative to WORKFLOW.md's folder, `~` and `$VAR` "
        "expanded; required); `active_states` / `terminal_states` as for Linear. No secrets. "
        "Error: `local_tracker_file` when the path is unset."
    ),
    scope=(
        "Every entry of the file's `issues:` list, file order; no pages, no request limits; "
        "the file is parsed again only when its bytes change."
    ),
    identity="`id` and `identifier` as written (each unique in the file); `native_ref` is null.",
    normalization=(
        "`state` as written; labels lowercased; `priority` an integer (or a digit string) or "
        "null; timestamps as YAML gives them; `blocked_by` names other entries by id or "
        "identifier; `dispatchable` is false for a `Todo` issue with a blocker not in a "
        "terminal state. The file is one document: a malformed entry (missing id, "
        "identifier, title or state, a duplicate, a bad type) fails every read with one "
        "line naming it."
    ),
    agent_tools="None. `move_issue` (the console's move) rewrites the entry's `state:` in place.",
    errors="`local_tracker_file` -> `tracker_request`; every problem is one line.",
)


class LocalTracker:
    """:class:`~symphony_tui.trackers.base.Tracker` over the file at
    ``settings().tracker.path`` (already resolved against the WORKFLOW.md folder)."""

    kind = "local"
    profile = LOCAL_PROFILE

    def __init__(self, settings: Callable[[], Settings]) -> None:
        self._settings = settings
        self._write_lock = asyncio.Lock()
        self._cache: tuple[str, str, list[Issue]] | None = None  # (path, digest, issues)

    def secret_environment_names(self) -> frozenset[str]:
        """A file needs no credential (spec §15.3): nothing to withhold."""
        return frozenset()

    def _path(self) -> Path:
        path = self._settings().tracker.path
        if not path:
            raise _fail("tracker.path is not set for tracker.kind local")
        return Path(path)

    def _read(self, path: Path) -> tuple[bytes, str]:
        try:
            data = path.read_bytes()
        except FileNotFoundError as err:
            raise _fail(f"{path}: file not found") from err
        except OSError as err:
            raise _fail(f"{path}: cannot read: {err.strerror or err}") from err
        try:
            return data, data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise _fail(f"{path}: not UTF-8 text ({err})") from err

    def _issues(self) -> list[Issue]:
        path = self._path()
        data, text = self._read(path)
        digest = hashlib.sha256(data).hexdigest()
        cached = self._cache
        if cached is not None and cached[0] == str(path) and cached[1] == digest:
            return cached[2]
        issues = parse_issues(path, text)
        self._cache = (str(path), digest, issues)
        return issues

    def _routed(self) -> list[Issue]:
        """The file's issues with ``dispatchable`` decided (the ``Todo`` blocker rule)."""
        tracker = self._settings().tracker
        return [
            i.model_copy(
                update={
                    "dispatchable": not todo_waits_for_blockers(
                        i.state, i.blocked_by, tracker.is_terminal
                    )
                }
            )
            for i in self._issues()
        ]

    async def fetch_candidate_issues(self) -> list[Issue]:
        """Issues whose state is one of ``tracker.active_states`` (case-insensitive), in
        file order."""
        tracker = self._settings().tracker
        return [i for i in self._routed() if tracker.is_active(i.state)]

    async def fetch_issues_by_states(self, states: Sequence[str]) -> list[Issue]:
        """Issues in any of ``states`` (case-insensitive); ``[]`` for no states, without
        reading the file (spec §17.3)."""
        wanted = {s.strip().lower() for s in states if s.strip()}
        if not wanted:
            return []
        return [i for i in self._routed() if i.state.strip().lower() in wanted]

    async def fetch_issues_by_ids(self, issue_ids: Sequence[str]) -> list[Issue]:
        """The issues with these ids, in the order asked; absent ids are left out; ``[]``
        without reading the file."""
        ids = dedupe_ids(issue_ids)
        if not ids:
            return []
        by_id = {i.id: i for i in self._routed()}
        return [by_id[i] for i in ids if i in by_id]

    async def move_issue(self, issue_id: str, state: str) -> Issue:
        """Set the issue's ``state`` in the file and return the issue as it now is.

        Any non-blank state name is accepted (tracker states are free text). Raises
        ``TrackerError("local_tracker_file")`` for a blank state, an unknown id, a file that
        does not parse, or an entry whose state cannot be rewritten safely.
        """
        if not isinstance(state, str) or not state.strip():
            raise _fail("the new state must not be blank")
        state = state.strip()
        path = self._path()
        async with self._write_lock:
            await asyncio.to_thread(self._move_locked, path, issue_id, state)
        for issue in self._routed():
            if issue.id == issue_id:
                return issue
        raise _fail(f"{path}: issue {issue_id!r} vanished after the move")

    def _move_locked(self, path: Path, issue_id: str, state: str) -> None:
        target = Path(os.path.realpath(path))  # write through a symlink, keep the link
        with _folder_lock(target.parent):
            for _ in range(EDIT_RETRIES):
                data, text = self._read(target)
                issues = parse_issues(path, text)  # refuse to edit a file that is already bad
                if not any(i.id == issue_id for i in issues):
                    raise _fail(f"{path}: no issue with id {issue_id!r}")
                new_text = _rewrite_state(path, text, issue_id, state)
                if new_text == text:
                    return
                try:
                    atomic_write_bytes(
                        target, new_text.encode("utf-8"), os.stat(target).st_mode, expect=data
                    )
                    return
                except ConcurrentEditError:
                    continue  # someone edited the file meanwhile: apply the move to theirs
            raise _fail(f"{path}: the file kept changing while moving {issue_id!r}; try again")

    async def aclose(self) -> None:
        self._cache = None


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    # flock on the folder itself: no lock file left next to the user's issues file, and the
    # lock survives the file being replaced (a lock on the file's inode would not).
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _find_entry(root: yaml.Node, issue_id: str) -> yaml.MappingNode | None:
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "issues":
            if not isinstance(value, yaml.SequenceNode):
                return None
            for item in value.value:
                if not isinstance(item, yaml.MappingNode):
                    continue
                for k, v in item.value:
                    if (
                        isinstance(k, yaml.ScalarNode)
                        and k.value == "id"
                        and isinstance(v, yaml.ScalarNode)
                        and v.value.strip() == issue_id
                    ):
                        return item
    return None


def _value_node(entry: yaml.MappingNode, key_name: str) -> yaml.Node | None:
    found = None
    for k, v in entry.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key_name:
            found = v  # YAML keeps the last of duplicate keys; so do we
    return found


def _scalar_forms(value: str) -> list[str]:
    forms = [json.dumps(value, ensure_ascii=False)]
    if _PLAIN_SAFE.fullmatch(value) and value == value.strip():
        forms.insert(0, value)
    return forms


def _splice(text: str, node: yaml.Node, replacement: str) -> str:
    start, end = node.start_mark.index, node.end_mark.index
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        # A block scalar's span runs to the start of the next line; keep that line break.
        replacement += "\n"
    return text[:start] + replacement + text[end:]


def _rewrite_state(path: Path, text: str, issue_id: str, state: str) -> str:
    """``text`` with the state (and an existing ``updated_at``) of ``issue_id`` replaced,
    everything else untouched; verified by parsing the result."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as err:
        raise _fail(f"{path}: invalid YAML: {err}") from err
    entry = _find_entry(root, issue_id) if root is not None else None
    state_node = _value_node(entry, "state") if entry is not None else None
    if entry is None or state_node is None:
        raise _fail(f"{path}: cannot locate the state of issue {issue_id!r} in the file")

    before = yaml.load(text, Loader=_Loader)
    expected = copy.deepcopy(before)
    stamp = datetime.now(UTC).replace(microsecond=0)
    edits: list[tuple[yaml.Node, list[str]]] = [(state_node, _scalar_forms(state))]
    updated_node = _value_node(entry, "updated_at")
    if isinstance(updated_node, yaml.ScalarNode):
        edits.append((updated_node, [stamp.isoformat().replace("+00:00", "Z")]))
    for item in expected["issues"]:
        if isinstance(item, dict) and _scalar_text(item.get("id")) == issue_id:
            item["state"] = state
            if "updated_at" in item and len(edits) > 1:
                item["updated_at"] = stamp

    # Splice from the end of the file backwards so earlier offsets stay valid.
    edits.sort(key=lambda e: e[0].start_mark.index, reverse=True)
    for forms in _form_choices([f for _, f in edits]):
        candidate = text
        for (node, _), form in zip(edits, forms, strict=True):
            candidate = _splice(candidate, node, form)
        try:
            if yaml.load(candidate, Loader=_Loader) == expected:
                return candidate
        except yaml.YAMLError:
            continue
    raise _fail(
        f"{path}: cannot rewrite the state of issue {issue_id!r} safely "
        "(anchors or unusual YAML around it); edit the file by hand"
    )


def _form_choices(options: list[list[str]]) -> Iterator[tuple[str, ...]]:
    if not options:
        yield ()
        return
    for first in options[0]:
        for rest in _form_choices(options[1:]):
            yield (first, *rest)
