"""Project names of a fleet (docs/fleet.md, "Names and ids").

A name has no ``/`` (ids are ``project/id``), no whitespace and no control character.
The projects a workflow or URL target names are named once, from the targets as written,
before anything is reached: ``fleet --list`` and the console name them alike, whichever
scheduler answers first or at all. First the names the operator chose (``name=``), in
order; then each other workflow or URL target, in order, by its own: a workflow's folder
name, a URL's ``host:port``. The first to want a name keeps it; a later one takes the name
of a folder above its own as a suffix (``app-work``, nearest first), else a number
(``app-2``). Schedulers found while the fleet runs (``local``, ``ssh://``) are named the same
way when first seen, never with a name decided up front.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Container, Iterable, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from symphony_tui.fleet.targets import Target

#: Folders above a workflow's own whose names may tell two projects apart.
FOLDERS_UP = 3

_DASHES = re.compile(r"--+")


def _safe(text: str) -> str:
    """``text`` with each ``/``, space and unprintable character (control, format,
    separator, unassigned) a ``-``, runs of ``-`` one, none at either end."""
    marked = "".join(c if c.isprintable() and c not in "/ " else "-" for c in text)
    return _DASHES.sub("-", marked).strip("-")


def clean(text: str) -> str:
    """``text`` as a name (:func:`_safe`); ``project`` when nothing is left."""
    return _safe(text) or "project"


def folders(workflow_path: str) -> list[str]:
    """The names of the folders above the workflow's own, nearest first (at most
    :data:`FOLDERS_UP`)."""
    if not workflow_path:
        return []
    above = PurePath(workflow_path).parent.parents
    return [p.name for p in list(above)[:FOLDERS_UP] if p.name]


def unique(
    base: str, taken: Container[str], qualifiers: Iterable[str] = (), *, at: str | None = None
) -> str:
    """The first of ``base``, ``base-Q`` for each of ``qualifiers``, ``base-2``, ``base-3``...
    not in ``taken`` (each followed by ``@at`` when ``at`` is given), cleaned (:func:`clean`)."""
    stem = clean(base)
    tail = f"@{clean(at)}" if at else ""
    suffixes = (q for q in map(_safe, qualifiers) if q)
    for candidate in (stem, *(f"{stem}-{q}" for q in suffixes)):
        if candidate + tail not in taken:
            return candidate + tail
    n = 2
    while f"{stem}-{n}{tail}" in taken:
        n += 1
    return f"{stem}-{n}{tail}"


def url_base(url: str) -> str:
    """A URL target's own name: ``host:port`` as written (``host`` without a port; an
    IPv6 host in brackets, in its shortest form)."""
    parts = urlsplit(url)
    host = parts.hostname or "project"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        host = f"[{address.compressed}]" if address.version == 6 else address.compressed
    return f"{host}:{parts.port}" if parts.port else host


def decided(targets: Sequence[Target]) -> dict[str, str]:
    """Target text -> its project's name, for every workflow or URL target and every
    target with ``name=`` (an ``ssh://`` target's is where its schedulers' names start).
    Deterministic: the module doc's order, nothing reached."""
    names: dict[str, str] = {}
    for target in targets:
        if target.name is not None and target.text not in names:
            names[target.text] = unique(target.name, names.values())
    for target in targets:
        if target.text in names:
            continue
        if target.kind == "workflow":
            base, above = PurePath(target.text).parent.name, folders(target.text)
        elif target.kind == "url":
            base, above = url_base(target.text), []
        else:
            continue
        names[target.text] = unique(base, names.values(), above)
    return names
