"""Per-issue workspaces: create, reuse, hooks, removal and recovery (spec §9).

Settings come from a provider so a reloaded ``WORKFLOW.md`` (new root, new hooks, new
timeout) applies to the next call without rebuilding the manager (spec §6.2).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from symphony_tui.config.child_env import ChildEnv
from symphony_tui.config.settings import Settings
from symphony_tui.domain import Issue, RecoveredWorkspace
from symphony_tui.hosts.local_group import boot_id, end_group, same_group
from symphony_tui.hosts.ssh import HostTargets
from symphony_tui.observability.logs import log_kv
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.hooks import HookCutoff, HookResult, run_hook
from symphony_tui.workspaces.manifest import (
    manifest_dir,
    manifest_mtime,
    read_manifest,
    read_section,
)
from symphony_tui.workspaces.manifest_writer import ManifestWriter
from symphony_tui.workspaces.paths import (
    ensure_inside_root,
    legacy_workspace_key,
    workspace_key,
    workspace_path,
)
from symphony_tui.workspaces.recovery import recovered_from
from symphony_tui.workspaces.remote import RemoteWorkspaces

log = logging.getLogger(__name__)

HOOK_NAMES = ("after_create", "before_run", "after_run", "before_remove")
#: Left-over scratch folders removed from a workspace when it is prepared (spec §17.2
#: "temporary artifacts (tmp, .elixir_ls) are removed during prep").
TEMP_ARTIFACTS = ("tmp", ".elixir_ls")

_EPOCH = datetime.min.replace(tzinfo=UTC)

#: The scheduler's lock file in the workspace root (``scheduler/project_lock.py``): its
#: ``+`` is a character no workspace key holds, so no issue's workspace can be named like it.
ROOT_LOCK_NAME = ".symphony-tui+root.lock"
#: Names in the root that are never an issue's workspace, whatever its identifier: the lock
#: and the name earlier versions gave it (a scheduler of one may share the root).
RESERVED_NAMES = frozenset({ROOT_LOCK_NAME, ".symphony-tui.lock"})


def _now() -> datetime:
    return datetime.now(UTC)


def _rmtree(path: Path) -> None:
    """``shutil.rmtree`` that also removes read-only entries (Go module caches, git packs)."""

    def make_writable_and_retry(func: Callable[..., Any], p: str, _exc: object) -> None:
        parent = os.path.dirname(p)
        with contextlib.suppress(OSError):
            os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        with contextlib.suppress(OSError):
            os.chmod(p, os.lstat(p).st_mode | stat.S_IWUSR)
        func(p)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=make_writable_and_retry)
    else:
        shutil.rmtree(path, onerror=make_writable_and_retry)


def _rmtree_quiet(path: Path) -> None:
    try:
        _rmtree(path)
    except OSError as err:
        log_kv(log, "WARNING", "could not remove workspace", path=str(path), error=str(err))


class WorkspaceManager:
    """Owns the workspace folders under ``settings().workspace.root``.

    All methods validate containment (spec §9.5); calls for the same workspace key are
    serialized so a removal cannot race a creation.
    """

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        env: Mapping[str, str] | None = None,
        unset: Iterable[str] = (),
    ) -> None:
        """``env`` (laid over ``os.environ``) is the hooks' base environment; ``unset`` and
        the workflow's ``tracker.secret_env_names`` are scrubbed from it
        (config/child_env.py)."""
        self._settings = settings
        self._env = dict(env or {})
        self._unset = frozenset(unset)
        self._locks: dict[str, asyncio.Lock] = {}
        #: Every manifest write of this root goes through this writer (one thread, per-file
        #: order kept): the scheduler's ``run`` / ``session`` sections and this manager's
        #: ``issue`` and ``run.hooks``, so two writers of one file never race.
        self.manifests = ManifestWriter()
        #: Ends every hook of this root, local or on a host, once the scheduler stops
        #: (:meth:`stop_hooks`).
        self.hooks_cutoff = HookCutoff()
        #: Workspaces on worker hosts (``worker.ssh_hosts``): the methods below
        #: take ``host=`` and hand those calls to it.
        self.remote = RemoteWorkspaces(
            settings,
            HostTargets(settings),
            self.manifests,
            secrets=self._unset,
            cutoff=self.hooks_cutoff,
        )

    @property
    def root(self) -> Path:
        return Path(self._settings().workspace.root).expanduser().resolve()

    def stop_hooks(self, reason: str, grace_s: float) -> None:
        """The scheduler is stopping: every hook running now or started later (``after_run``
        of a stopped run, ``before_remove``) gets ``grace_s`` seconds from its own start (one
        running now: from now), then its process group is ended and its result is
        ``cut_short=reason`` (:class:`~symphony_tui.workspaces.hooks.HookCutoff`)."""
        self.hooks_cutoff.cut(reason, grace_s)

    @property
    def hooks_cut_short(self) -> list[str]:
        """One line per hook the stop ended (``ABC-1: after_run hook cut short (...)``)."""
        return list(self.hooks_cutoff.ended)

    def path_for(self, identifier: str) -> Path:
        """The workspace path of ``identifier``. Raises ``WorkspaceError`` when it would
        leave the root (``workspace_outside_root``) or take a name the scheduler keeps for
        itself (``workspace_reserved_name``, :data:`RESERVED_NAMES`: its lock)."""
        if workspace_key(identifier) in RESERVED_NAMES:
            raise WorkspaceError(
                "workspace_reserved_name",
                f"{identifier!r} names the scheduler's lock file in the workspace root; "
                "it gets no workspace",
            )
        return workspace_path(self.root, identifier)

    def carry_over(self, identifier: str) -> Path | None:
        """Find a workspace ``identifier`` has under the key earlier releases gave it
        (:func:`legacy_workspace_key`) and move it to its current key; returns the path the
        workspace now has, or ``None`` when there is none to carry over.

        Only a folder whose ``issue`` manifest names ``identifier`` is taken (``A_B`` may be
        the workspace of issue ``A_B`` itself); nothing is ever deleted. When the rename
        fails the old folder is used in place (its manifest records its key) and one
        warning line says why."""
        new = self.path_for(identifier)
        old = self.root / legacy_workspace_key(identifier)
        if old.name == new.name or new.exists() or new.is_symlink():
            return None
        if old.is_symlink() or not old.is_dir():
            return None
        if read_section(old, "issue").get("identifier") != identifier:
            return None
        try:
            os.rename(old, new)
        except OSError as err:
            log_kv(
                log, "WARNING", "workspace kept under its earlier key",
                issue_identifier=identifier, path=str(old), error=str(err),
            )  # fmt: skip
            return old
        self.manifests.write(new, "issue", "issue", workspace_key=new.name)
        log_kv(
            log, "INFO", "workspace carried over to its collision-safe key",
            issue_identifier=identifier, old=old.name, new=new.name,
        )  # fmt: skip
        return new

    def carry_over_all(self) -> list[tuple[str, str]]:
        """Start-up pass of :meth:`carry_over` over every folder under the root whose
        manifest names an issue whose key changed: ``(old key, new key)`` per folder
        moved. Blocking (call it from a thread); unreadable folders are skipped."""
        moved: list[tuple[str, str]] = []
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return moved
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                identifier = read_section(Path(entry.path), "issue").get("identifier")
            except OSError:
                continue
            if not isinstance(identifier, str) or not identifier:
                continue
            if entry.name != legacy_workspace_key(identifier):
                continue
            try:
                path = self.carry_over(identifier)
            except WorkspaceError:
                continue
            if path is not None and path.name != entry.name:
                moved.append((entry.name, path.name))
        return moved

    def _lock(self, identifier: str) -> asyncio.Lock:
        key = workspace_key(identifier)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def ensure(self, issue: Issue, *, host: str | None = None) -> tuple[Path, bool]:
        """Create the issue's workspace if missing; returns ``(path, created)``. With
        ``host`` (a ``worker.ssh_hosts`` entry) the workspace is on that host
        (:class:`~symphony_tui.workspaces.remote.RemoteWorkspaces`).

        A new workspace runs ``after_create``; when it fails (or times out) the folder is
        removed and ``WorkspaceError("after_create_failed")`` is raised with ``.hook`` set.
        A non-folder at the path raises ``WorkspaceError("workspace_not_a_directory")``.
        A reused workspace has its :data:`TEMP_ARTIFACTS` removed. The ``issue`` manifest
        section is written after the hook so ``after_create`` sees an empty folder (a
        ``git clone .`` there must work).
        """
        async with self._lock(issue.identifier):
            if host is not None:
                path, created = await self.remote.ensure(host, issue)
                self._issue_manifest(path, issue, created)
                return path, created
            root = self.root
            try:
                root.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                raise WorkspaceError(
                    "workspace_root_unavailable",
                    f"workspace.root {root} is a file, not a folder: move it away or set "
                    "workspace.root elsewhere",
                ) from None
            except OSError as err:
                raise WorkspaceError(
                    "workspace_root_unavailable", f"cannot create {root}: {err.strerror or err}"
                ) from err
            path = self.carry_over(issue.identifier) or self.path_for(issue.identifier)
            created = False
            if path.exists() or path.is_symlink():
                if not path.is_dir():
                    raise WorkspaceError(
                        "workspace_not_a_directory",
                        f"{path} exists and is not a directory; move it away",
                    )
                self._remove_temp_artifacts(path)
            else:
                try:
                    path.mkdir()
                except OSError as err:
                    raise WorkspaceError(
                        "workspace_create_failed", f"cannot create {path}: {err}"
                    ) from err
                created = True
                await self._after_create(path, issue)
            self._issue_manifest(path, issue, created)
            log_kv(
                log,
                "INFO",
                "workspace ready",
                issue_id=issue.id,
                issue_identifier=issue.identifier,
                path=str(path),
                created=created,
            )
            return path, created

    def _issue_manifest(self, path: Path, issue: Issue, created: bool) -> None:
        now = _now()
        fields: dict[str, Any] = {
            "id": issue.id,
            "identifier": issue.identifier,
            "title": issue.title,
            "state": issue.state,
            "url": issue.url,
            "workspace_key": path.name,
            "updated_at": now,
        }
        if created:
            fields["created_at"] = now
        # Queued (the writer keeps per-file order with the scheduler's writes); on disk
        # after ``manifests.flush()``.
        self.manifests.write(path, "issue", "issue", defaults={"created_at": now}, **fields)

    async def _after_create(self, path: Path, issue: Issue) -> None:
        try:
            result = await self.run_hook("after_create", path, issue)
        except BaseException:
            # Cancelled or crashed mid-hook: no awaiting here, just clean up and go.
            _rmtree_quiet(path)
            raise
        if result is not None and not result.ok:
            await self.manifests.flush()  # the hook's queued write lands before removal
            await asyncio.to_thread(_rmtree_quiet, path)
            raise WorkspaceError(
                "after_create_failed",
                f"after_create hook for {issue.identifier} {result.summary()}; workspace removed",
                hook=result,
            )

    def _remove_temp_artifacts(self, path: Path) -> None:
        for name in TEMP_ARTIFACTS:
            target = path / name
            try:
                if target.is_symlink() or target.is_file():
                    target.unlink()
                elif target.is_dir():
                    _rmtree(target)
            except OSError as err:
                log_kv(
                    log,
                    "WARNING",
                    "could not remove temp artifact",
                    path=str(target),
                    error=str(err),
                )

    async def run_hook(
        self, name: str, path: Path, issue: Issue | None = None, *, host: str | None = None
    ) -> HookResult | None:
        """Run hook ``name`` (one of :data:`HOOK_NAMES`) in ``path``; None when the hook is
        not configured. The result is recorded under ``run.hooks`` in the manifest. The
        caller applies the failure policy (spec §9.4): ``before_run`` failure aborts the
        attempt; ``after_run`` / ``before_remove`` failures are only logged (here)."""
        if name not in HOOK_NAMES:
            raise ValueError(f"unknown hook {name!r} (use one of {HOOK_NAMES})")
        if host is not None:
            return await self.remote.run_hook(host, name, path, issue)
        settings = self._settings()
        script = getattr(settings.hooks, name)
        if not script or not script.strip():
            return None
        path = ensure_inside_root(self.root, path)
        if not path.is_dir():
            return HookResult(name, False, None, False, f"workspace {path} does not exist", 0)
        # The agents' recipe: the scheduler's secrets scrubbed, ``hooks.env`` laid over
        # (which may name a secret on purpose: hooks often talk to the tracker).
        secrets = self._unset | set(settings.tracker.secret_env_names)
        inherit = ChildEnv(self._env, secrets).build(settings.hooks.env, pass_secrets=True)
        env = {"SYMPHONY_WORKSPACE": str(path), "SYMPHONY_HOOK": name}
        if issue is not None:
            env["SYMPHONY_ISSUE_ID"] = issue.id
            env["SYMPHONY_ISSUE_IDENTIFIER"] = issue.identifier
        else:
            # before_remove runs from an identifier only (start-up sweep, reconciliation):
            # the manifest still knows the issue, so every hook sees the same variables.
            await self.manifests.flush()  # the queued issue write is on disk
            known = read_section(path, "issue")
            for var, key in (
                ("SYMPHONY_ISSUE_ID", "id"),
                ("SYMPHONY_ISSUE_IDENTIFIER", "identifier"),
            ):
                if isinstance(known.get(key), str):
                    env[var] = known[key]
        result = await run_hook(
            name,
            script,
            path,
            settings.hooks.timeout_ms,
            env,
            inherit=inherit,
            cutoff=self.hooks_cutoff,
        )
        if path.is_dir():
            # Merged into ``run.hooks`` on the writer thread, after the file's earlier writes.
            self.manifests.write(path, "run", "hooks", nested={"hooks": {name: result.summary()}})
        return result

    async def remove(
        self, identifier: str, *, host: str | None = None, path: Path | None = None
    ) -> HookResult | None:
        """Delete the workspace of ``identifier`` (no-op when missing). ``before_remove``
        runs first; its failure is logged and ignored (spec §9.4). A symlink at the path is
        unlinked, never followed. Raises ``WorkspaceError("workspace_remove_failed")`` when
        the folder cannot be deleted."""
        async with self._lock(identifier):
            if host is not None:
                return await self.remote.remove(host, identifier, path)
            path = self.path_for(identifier)
            if path.is_symlink():
                path.unlink()
                return None
            if not path.exists():
                return None
            if not path.is_dir():
                log_kv(log, "WARNING", "removing a non-directory workspace entry", path=str(path))
                path.unlink()
                return None
            result = await self.run_hook("before_remove", path)
            if self.manifests.discard(path):  # its queued writes are moot; none in flight
                await self.manifests.flush()
            try:
                await asyncio.to_thread(_rmtree, path)
            except OSError as err:
                raise WorkspaceError(
                    "workspace_remove_failed", f"cannot remove {path}: {err}"
                ) from err
            log_kv(log, "INFO", "workspace removed", issue_identifier=identifier, path=str(path))
            return result

    async def reap(self, skip: Iterable[str] = ()) -> tuple[list[str], list[str], list[str]]:
        """End what runs of an earlier scheduler left running on this machine (it crashed
        or was killed): the agent process group each workspace's manifest records
        (``session.agent_group``, ``scheduler/manifests.py``) and the groups of the
        terminals an ACP agent had this client run (``session.terminal_groups``, a list of
        the same records; agents/acp/terminals.py), but in the workspaces whose
        keys are in ``skip``. A group is ended (SIGTERM, a grace, SIGKILL, all at once)
        only while it is provably the recorded one (``hosts/local_group.same_group``: same
        boot, same leader start time), so a reused pid is never signalled; each record
        is then cleared. Records marked ``adoptable`` are left alone for recovery to
        re-adopt, and so are those of another boot (another machine on a shared root).
        Returns ``(ended, adoptable, gone)``, ``"<key> <pgid>"`` each, ``gone`` being the
        runs whose agent had already ended with that scheduler; the local side of
        ``RemoteWorkspaces.reap``. Never raises for a bad record."""
        await self.manifests.flush()
        found = await asyncio.to_thread(self._recorded_groups, frozenset(skip))
        ended: list[str] = []
        adoptable: list[str] = []
        gone: list[str] = []
        ending: dict[int, Any] = {}
        boot = boot_id()
        for ws, record in found:
            if record.get("terminal") is True:  # an ACP terminal: ends with its run
                if record.get("boot_id") == boot and same_group(record, ws):
                    pgid = record["pgid"]
                    if pgid not in ending:
                        ending[pgid] = asyncio.ensure_future(end_group(pgid))
                    ended.append(f"{ws.name} {pgid}")
                self.manifests.write(ws, "session", "terminal_groups", terminal_groups=None)
                continue
            if record.get("boot_id") != boot:
                continue  # another machine's (a shared root) or an earlier boot's: not ours
            pgid = record.get("pgid")
            if record.get("adoptable") is True:
                adoptable.append(f"{ws.name} {pgid}")
                continue
            if isinstance(pgid, int) and pgid not in ending and same_group(record, ws):
                ending[pgid] = asyncio.ensure_future(end_group(pgid))
                ended.append(f"{ws.name} {pgid}")
            elif pgid not in ending:
                gone.append(f"{ws.name} {pgid}")
            self.manifests.write(ws, "session", "agent_group", agent_group=None)
        if ending:
            await asyncio.gather(*ending.values())
        for line in ended:
            log_kv(log, "WARNING", "leftover agent process group ended", group=line)
        return ended, adoptable, gone

    def _recorded_groups(self, skip: frozenset[str]) -> list[tuple[Path, dict[str, Any]]]:
        """``(workspace, session.agent_group)`` of every workspace under the root that
        records one, but those in ``skip``."""
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return []
        found = []
        for entry in entries:
            if entry.name in skip or entry.name in RESERVED_NAMES:
                continue
            with contextlib.suppress(OSError):
                if not entry.is_dir(follow_symlinks=False):
                    continue
            section = read_section(Path(entry.path), "session")
            record = section.get("agent_group")
            if isinstance(record, dict):
                found.append((Path(entry.path), record))
            terminals = section.get("terminal_groups")
            for term in terminals if isinstance(terminals, list) else []:
                if isinstance(term, dict):
                    found.append((Path(entry.path), {**term, "terminal": True}))
        return found

    def recover(self, hosts: Iterable[str] | None = None) -> list[RecoveredWorkspace]:
        """Every workspace folder under the root that has manifests, newest first (by the
        latest manifest write). Unreadable folders and bad manifest values are skipped.
        Blocks until queued manifest writes are on disk (call it from a thread when some
        may be waiting). Workspaces on worker hosts follow, with their ``host`` set (an
        unreachable host lists none): on every listed host, or only on ``hosts`` (the
        scheduler passes those up, so a down host costs no connect timeout)."""
        self.manifests.flush_sync()
        remote: list[RecoveredWorkspace] = []
        wanted = None if hosts is None else set(hosts)
        for host in self._settings().worker.ssh_hosts:
            if wanted is not None and host not in wanted:
                continue
            remote.extend(self.remote.recover_sync(host))
        remote.sort(key=lambda r: (r.ended_at or r.started_at or _EPOCH, r.key), reverse=True)
        return self._recover_local() + remote

    def _recover_local(self) -> list[RecoveredWorkspace]:
        root = self.root
        found: list[tuple[float, RecoveredWorkspace]] = []
        try:
            entries = list(os.scandir(root))
        except OSError:
            return []
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            ws = Path(entry.path)
            if not manifest_dir(ws).is_dir():
                continue
            recovered = recovered_from(ws, read_manifest(ws))
            if recovered is not None:
                found.append((manifest_mtime(ws), recovered))
        found.sort(key=lambda item: (item[0], item[1].key), reverse=True)
        return [r for _, r in found]
