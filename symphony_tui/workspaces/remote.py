"""Per-issue workspaces on a worker host (spec §9 on another machine).

The same rules as :class:`~symphony_tui.workspaces.manager.WorkspaceManager`, carried out
with ``sh`` over ssh (``hosts/ssh.py``): the root is the host's (``worker.hosts.<h>.
workspace_root``, ``worker.workspace_root``, else ``workspace.root``; ``~/`` is the
host's home), resolved there with ``pwd -P``; a workspace is ``<root>/<workspace_key>``
(sanitized, so it cannot leave the root) and a symlink in its place is refused. The four
hooks run there with their timeout, in a process group that a timeout or a cancelled
caller ends (``hosts/remote_group.py``); manifests are written atomically there
(``remote_manifest.py``); recovery lists the host's workspaces with the host's name.

The hooks' environment on a host is the host's login environment plus the ``SYMPHONY_*``
variables, ``hooks.env`` and the host's ``env``; the scheduler's secrets are never sent
(a secret named in ``hooks.env`` is left out on a host, unlike a local hook).

Errors: ``WorkspaceError`` with a one-line reason (``workspace_host_unreachable`` when the
host cannot be reached, with ``.host_lost`` set); a failing hook is a ``HookResult``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from symphony_tui.config.child_env import ChildEnv
from symphony_tui.config.settings import Settings
from symphony_tui.domain import Issue, RecoveredWorkspace
from symphony_tui.hosts.remote_group import (
    NO_WORKSPACE_EXIT,
    group_script,
    home_path,
    kill_script,
    reap_script,
)
from symphony_tui.hosts.ssh import Completed, SshError, SshTarget
from symphony_tui.observability.redact import redact
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.hooks import OUTPUT_LIMIT, HookCutoff, HookResult, _Tail, outlast
from symphony_tui.workspaces.manifest import MANIFEST_DIR, SECTIONS
from symphony_tui.workspaces.manifest_writer import ManifestWriter
from symphony_tui.workspaces.paths import legacy_workspace_key, workspace_key
from symphony_tui.workspaces.recovery import recovered_from
from symphony_tui.workspaces.remote_manifest import RemoteManifests

#: Seconds a workspace command (create, list, remove) may take on a host.
COMMAND_TIMEOUT_S = 60.0
_TEMP_ARTIFACTS = ("tmp", ".elixir_ls")


class RemoteWorkspaces:
    """Workspaces on the hosts of ``settings().worker``; ``target(name)`` gives the
    :class:`SshTarget` of a host, ``manifests`` is the scheduler's manifest writer (each
    remote workspace is mounted on its host's store)."""

    def __init__(
        self,
        settings: Callable[[], Settings],
        target: Callable[[str], SshTarget],
        manifests: ManifestWriter,
        *,
        secrets: Iterable[str] = (),
        cutoff: HookCutoff | None = None,
    ) -> None:
        self._settings = settings
        self._cutoff = cutoff
        self._target = target
        self._manifests = manifests
        self._secrets = frozenset(secrets)
        self._stores: dict[str, RemoteManifests] = {}
        #: host -> its root as the host resolved it (``pwd -P``).
        self._roots: dict[str, str] = {}

    # ---------------------------------------------------------------- paths

    def root_setting(self, host: str) -> str:
        settings = self._settings()
        return settings.worker.workspace_root_for(host, settings.workspace.root)

    def path_for(self, host: str, identifier: str) -> Path | None:
        """The workspace path on ``host`` once its root was resolved (None before)."""
        root = self._roots.get(host)
        return None if root is None else Path(root) / workspace_key(identifier)

    def store(self, host: str) -> RemoteManifests:
        store = self._stores.get(host)
        if store is None or store.target is not self._target(host):
            store = self._stores[host] = RemoteManifests(self._target(host))
        return store

    def mount(self, host: str, path: Path) -> None:
        self._manifests.mount(path, self.store(host))

    async def _run(self, host: str, script: str, what: str, **kw: Any) -> Completed:
        try:
            return await self._target(host).run(script, timeout_s=COMMAND_TIMEOUT_S, **kw)
        except SshError as err:
            raise WorkspaceError(
                "workspace_host_unreachable", f"{what}: {err}", host_lost=str(err)
            ) from None

    # ---------------------------------------------------------------- lifecycle

    async def ensure(self, host: str, issue: Issue) -> tuple[Path, bool]:
        """Create the issue's workspace on ``host`` if missing; returns ``(path,
        created)`` (the path on the host). Same contract as ``WorkspaceManager.ensure``."""
        key = workspace_key(issue.identifier)
        root = self.root_setting(host)
        artifacts = " ".join(f'"$ws"/{shlex.quote(a)}' for a in _TEMP_ARTIFACTS)
        script = (
            f"mkdir -p {home_path(root)} 2>&1 && cd {home_path(root)} || exit 90; "
            f'root=$(pwd -P); ws="$root"/{shlex.quote(key)}; '
            + _carry_over_script(issue.identifier, key)
            + 'if [ -L "$ws" ]; then echo "$ws is a symlink" >&2; exit 91; fi; '
            'if [ -e "$ws" ] && [ ! -d "$ws" ]; then exit 92; fi; '
            f'if [ -d "$ws" ]; then rm -rf {artifacts}; echo "reused $root"; '
            'else mkdir "$ws" 2>&1 || exit 93; echo "created $root"; fi'
        )
        done = await self._run(host, script, f"workspace for {issue.identifier}")
        out = done.stdout.decode("utf-8", "replace").strip().splitlines()
        last = out[-1] if out else ""
        if done.exit_code != 0 or not last.startswith(("created ", "reused ")):
            reason = (done.stderr_line() or (out[-1] if out else "")) or f"exit {done.exit_code}"
            code = {
                90: "workspace_root_unavailable",
                91: "workspace_outside_root",
                92: "workspace_not_a_directory",
            }.get(done.exit_code, "workspace_create_failed")
            raise WorkspaceError(code, f"on {host}: {reason}")
        created = last.startswith("created ")
        self._roots[host] = last.split(" ", 1)[1]
        path = Path(self._roots[host]) / key
        self.mount(host, path)
        if created:
            result = await self.run_hook(host, "after_create", path, issue)
            if result is not None and not result.ok:
                await self._manifests.flush()
                with contextlib.suppress(WorkspaceError):
                    await self._run(host, f"rm -rf {shlex.quote(str(path))}", "cleanup")
                self._forget(path)
                raise WorkspaceError(
                    "after_create_failed",
                    f"after_create hook for {issue.identifier} on {host} {result.summary()}; "
                    "workspace removed",
                    hook=result,
                )
        return path, created

    def _forget(self, path: Path) -> None:
        store = self._manifests.store(path)
        self._manifests.unmount(path)
        if isinstance(store, RemoteManifests):
            store.forget(path)

    def hook_env(self, host: str, name: str, path: Path, issue: Issue | None) -> dict[str, str]:
        settings = self._settings()
        recipe = ChildEnv({}, self._secrets | set(settings.tracker.secret_env_names))
        env: dict[str, str] = {}
        for source in (settings.hooks.env, settings.worker.env_for(host)):
            for k, v in recipe.overrides(source).items():
                if v is not None:
                    env[k] = v
        env.update({"SYMPHONY_WORKSPACE": str(path), "SYMPHONY_HOOK": name})
        if issue is not None:
            env["SYMPHONY_ISSUE_ID"] = issue.id
            env["SYMPHONY_ISSUE_IDENTIFIER"] = issue.identifier
        return env

    async def run_hook(
        self, host: str, name: str, path: Path, issue: Issue | None = None
    ) -> HookResult | None:
        """Run hook ``name`` in ``path`` on ``host`` within ``hooks.timeout_ms``; None when
        not configured. A timeout, a cancellation or the cutoff's deadline (a stopping
        scheduler: the result is ``cut_short``) ends the hook's process group there."""
        settings = self._settings()
        script = getattr(settings.hooks, name)
        if not script or not script.strip():
            return None
        if issue is None:
            await self._manifests.flush()
            known = await asyncio.to_thread(self.store(host).read, path, "issue")
            if isinstance(known.get("id"), str) and isinstance(known.get("identifier"), str):
                issue = Issue(id=known["id"], identifier=known["identifier"], title="", state="")
        env = self.hook_env(host, name, path, issue)
        pgid = f"{MANIFEST_DIR}/hook-{uuid.uuid4().hex[:8]}.pgid"
        # ``end_group``: nothing the hook started outlives it on the host either.
        command = group_script(
            str(path), script, pgid_file=pgid, env=env, merge_stderr=True, end_group=True
        )
        started = time.monotonic()
        target = self._target(host)
        timeout_s = max(settings.hooks.timeout_ms, 1) / 1000

        def elapsed() -> int:
            return int((time.monotonic() - started) * 1000)

        task = asyncio.ensure_future(target.run(command))
        try:
            outcome = await outlast(task, timeout_s, self._cutoff, started)
            if outcome != "done":
                await self._kill(target, path, pgid)
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                cut = self._cutoff.reason if outcome == "cut" and self._cutoff else None
                if cut is not None and self._cutoff is not None:
                    self._cutoff.record(
                        name, issue.identifier if issue else None, f"cut short ({cut})"
                    )
                return HookResult(
                    name, False, None, outcome == "timeout", "", elapsed(), cut_short=cut
                )
            done = task.result()
        except SshError as err:
            return HookResult(name, False, None, False, str(err), elapsed(), host_lost=str(err))
        except asyncio.CancelledError:
            await asyncio.shield(self._kill(target, path, pgid))
            task.cancel()
            if self._cutoff is not None and self._cutoff.active:
                why = f"cut short ({self._cutoff.reason})"
                self._cutoff.record(name, issue.identifier if issue else None, why)
            raise
        tail = _Tail(OUTPUT_LIMIT)
        tail.feed(done.stdout)
        result = HookResult(
            name, done.exit_code == 0, done.exit_code, False, redact(tail.text()), elapsed()
        )
        if done.exit_code != NO_WORKSPACE_EXIT:  # (a write would create the folder)
            self._manifests.write(path, "run", "hooks", nested={"hooks": {name: result.summary()}})
        return result

    async def _kill(self, target: SshTarget, path: Path, pgid: str) -> None:
        with contextlib.suppress(SshError, TimeoutError):
            await target.run(kill_script(str(path), pgid), timeout_s=15)

    async def remove(
        self, host: str, identifier: str, path: Path | None = None
    ) -> HookResult | None:
        """Run ``before_remove`` on ``host`` and delete the workspace there (no-op when
        missing); a symlink in its place is unlinked, never followed."""
        if path is None:
            path = self.path_for(host, identifier)
            if path is None:
                root = await self._run(
                    host, f"cd {home_path(self.root_setting(host))} 2>/dev/null && pwd -P", "root"
                )
                resolved = root.stdout.decode().strip()
                if not resolved:
                    return None
                self._roots[host] = resolved
                path = Path(resolved) / workspace_key(identifier)
        quoted = shlex.quote(str(path))
        probe = await self._run(
            host,
            f"if [ -L {quoted} ]; then rm -f {quoted}; echo link; "
            f"elif [ -d {quoted} ]; then echo dir; else echo none; fi",
            f"remove {identifier}",
        )
        if probe.stdout.decode().strip() != "dir":
            return None
        self.mount(host, path)
        result = await self.run_hook(host, "before_remove", path)
        if self._manifests.discard(path):
            await self._manifests.flush()
        done = await self._run(
            host, f"chmod -R u+w {quoted} 2>/dev/null; rm -rf {quoted}", f"remove {identifier}"
        )
        self._forget(path)
        if not done.ok:
            raise WorkspaceError(
                "workspace_remove_failed", f"cannot remove {path} on {host}: {done.stderr_line()}"
            )
        return result

    # ---------------------------------------------------------------- recovery

    async def reap(self, host: str, skip: Iterable[str] = ()) -> list[str]:
        """End what earlier runs left running on ``host`` (``hosts/remote_group.py``
        ``reap_script``): every process group named by a pgid file under the host's root,
        but in the workspaces whose keys are in ``skip``. Returns ``"<key> <pgid>"`` per
        group ended; raises ``WorkspaceError`` (``.host_lost`` set) when the host cannot
        be reached."""
        done = await self._run(
            host, reap_script(self.root_setting(host), skip), "end leftover processes"
        )
        lines = done.stdout.decode("utf-8", "replace").splitlines()
        return [x.split(" ", 1)[1] for x in lines if x.startswith("killed ")]

    def recover_sync(
        self, host: str, manifests: list[tuple[Path, dict[str, dict[str, Any]]]] | None = None
    ) -> list[RecoveredWorkspace]:
        """Every workspace with manifests under ``host``'s root, with ``host`` set (blocks;
        call from a thread); ``manifests``: what :meth:`manifests_sync` read already. An
        unreachable host lists nothing."""
        found: list[RecoveredWorkspace] = []
        if manifests is None:
            manifests = self.manifests_sync(host)
        for path, manifest in manifests:
            recovered = recovered_from(path, manifest)
            if recovered is not None:
                found.append(recovered.model_copy(update={"host": host}))
        return found

    def manifests_sync(self, host: str) -> list[tuple[Path, dict[str, dict[str, Any]]]]:
        """Every workspace with manifests under ``host``'s root and its manifest's
        sections, in one command (blocks; call from a thread). An unreachable host lists
        nothing."""
        sections = " ".join(SECTIONS)
        script = (
            f"cd {home_path(self.root_setting(host))} 2>/dev/null || exit 0; root=$(pwd -P); "
            'for d in "$root"/*; do [ -d "$d/.symphony" ] && [ ! -L "$d" ] || continue; '
            'printf "\\036%s\\n" "$d"; '
            f"for s in {sections}; do "
            'f="$d/.symphony/$s.json"; [ -f "$f" ] || continue; '
            'printf "\\037%s\\n" "$s"; cat "$f"; echo; done; done'
        )
        try:
            done = self._target(host).run_sync(script, timeout_s=COMMAND_TIMEOUT_S)
        except SshError:
            return []
        found: list[tuple[Path, dict[str, dict[str, Any]]]] = []
        for block in done.stdout.decode("utf-8", "replace").split("\x1e")[1:]:
            head, _, rest = block.partition("\n")
            manifest: dict[str, dict[str, Any]] = {}
            for part in rest.split("\x1f")[1:]:
                section, _, body = part.partition("\n")
                with contextlib.suppress(ValueError):
                    data = json.loads(body)
                    if isinstance(data, dict):
                        manifest[section.strip()] = data
            found.append((Path(head.strip()), manifest))
        return found


def _carry_over_script(identifier: str, key: str) -> str:
    """Shell that moves the workspace an earlier release left under
    :func:`legacy_workspace_key` to ``$ws`` (as ``WorkspaceManager.carry_over`` does here):
    only when ``$ws`` is missing, the old folder is a real folder and its ``issue`` manifest
    names ``identifier`` (as the manifest writer spells it: indented JSON, sorted keys).
    Nothing is deleted; a failed move leaves the old folder where it is."""
    old = legacy_workspace_key(identifier)
    if old == key:
        return ""
    line = f'  "identifier": {json.dumps(identifier)}'
    manifest = f'"$root"/{shlex.quote(old)}/{MANIFEST_DIR}/issue.json'
    return (
        f'if [ ! -e "$ws" ] && [ ! -L "$ws" ] && [ -d "$root"/{shlex.quote(old)} ] '
        f'&& [ ! -L "$root"/{shlex.quote(old)} ] '
        f"&& grep -qxF -e {shlex.quote(line + ',')} -e {shlex.quote(line)} {manifest} 2>/dev/null; "
        f'then mv "$root"/{shlex.quote(old)} "$ws" 2>/dev/null || true; fi; '
    )
