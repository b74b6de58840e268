"""How much memory and CPU each run's agent uses, and how much memory a machine has free:
one sampling pass per machine, whatever the number of runs on it.

- **This machine** (:func:`local_pass`): one walk over every process (parent, process
  group, resident set size, CPU times: ``/proc/<pid>/stat``, else ``psutil``), then each
  run's agent is its process and every descendant, plus the members of the process group
  it leads (an agent starts as a group leader, ``hosts/local_group.py``; a child that was
  re-parented still belongs to it). Free memory is ``psutil.virtual_memory().available``.
- **A worker host** (:func:`host_script`, :func:`parse_host_output`): one ``sh`` command
  over the host's shared ssh connection reads the agent pgid files of the runs'
  workspaces there (``hosts/remote_group.py``), then the members of those groups: from
  ``/proc/<pid>/stat`` where there is ``/proc`` (CPU in clock ticks), else from ``ps``
  (CPU in whole seconds); and ``MemAvailable`` of ``/proc/meminfo`` (unknown without it).

A pass yields each run's processes as :class:`Proc` records (pid, RSS bytes, CPU seconds
used so far); :class:`CpuMeter` turns two passes into a CPU percentage (100 = one core
busy), per process, so a child that exits between two passes does not make the figure
jump. Linux and any POSIX host with ``ps``; on this machine, what ``psutil`` supports.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import psutil

from symphony_tui.hosts.remote_group import home_path

#: Bytes in a MiB (settings name memory in MB, meaning MiB, as ``free -m`` does).
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Proc:
    """One process of a run's agent: ``pid``, resident set size in bytes, CPU seconds
    (user + system) it used so far."""

    pid: int
    rss_bytes: int
    cpu_s: float


@dataclass(frozen=True, slots=True)
class Memory:
    """A machine's memory in bytes: ``available`` (what new work can take without
    swapping, the kernel's estimate) and ``total``; None when the machine does not say."""

    available: int | None
    total: int | None


@dataclass(frozen=True, slots=True)
class Usage:
    """One run's agent at a pass: the sum of its processes' resident set sizes (bytes),
    its CPU use since the pass before in percent of one core (None on the first pass that
    saw it), how many processes it has, and the pid its processes were found from
    (``root``: the agent's, or its group's; runs sharing one server share it)."""

    rss_bytes: int
    cpu_percent: float | None
    processes: int
    root: int | None = None


@dataclass
class CpuMeter:
    """CPU percentages of keyed process sets from one pass to the next (see the module
    docstring); one meter per machine."""

    _last: dict[tuple[str, int], float] = field(default_factory=dict)
    _at: float | None = None

    def usage(self, groups: Mapping[str, Sequence[Proc]], now: float) -> dict[str, Usage]:
        """Each key's :class:`Usage` at monotonic second ``now``. A process not seen by the
        last pass counts all its CPU time (it started since); one that ended counts none."""
        elapsed = None if self._at is None else now - self._at
        seen: dict[tuple[str, int], float] = {}
        out: dict[str, Usage] = {}
        for key, procs in groups.items():
            known = any((key, p.pid) in self._last for p in procs)
            used = 0.0
            for p in procs:
                before = self._last.get((key, p.pid))
                used += max(0.0, p.cpu_s - before) if before is not None else p.cpu_s
                seen[(key, p.pid)] = p.cpu_s
            percent = None
            if elapsed is not None and elapsed > 0 and (known or not procs):
                percent = round(100.0 * used / elapsed, 1)
            out[key] = Usage(sum(p.rss_bytes for p in procs), percent, len(procs))
        self._last, self._at = seen, now
        return out


# ------------------------------------------------------------------ this machine


def _members(
    root: int, children: Mapping[int, list[int]], groups: Mapping[int, list[int]]
) -> set[int]:
    """``root``, its descendants and, when it leads a process group, that group's members."""
    out = {root}
    stack = [root, *groups.get(root, ())]
    out.update(stack)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_table() -> dict[int, tuple[int, int, Proc]] | None:
    """Every process as ``pid -> (ppid, pgid, Proc)`` from ``/proc/<pid>/stat`` (one read
    per process: a third of what ``psutil`` costs for the same fields); None without
    ``/proc``."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    if not os.path.exists("/proc/self/stat"):
        return None
    table: dict[int, tuple[int, int, Proc]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:  # gone since the listing
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) < 22 or fields[0] in (b"Z", b"X"):
            continue
        pid = int(name)
        cpu = (int(fields[11]) + int(fields[12])) / _TICKS
        table[pid] = (int(fields[1]), int(fields[2]), Proc(pid, int(fields[21]) * _PAGE, cpu))
    return table


def psutil_table() -> dict[int, tuple[int, int, Proc]]:
    """:func:`proc_table` through ``psutil`` (a machine without ``/proc``)."""
    table: dict[int, tuple[int, int, Proc]] = {}
    for proc in psutil.process_iter(["ppid", "memory_info", "cpu_times"]):
        info = proc.info
        mem, cpu = info.get("memory_info"), info.get("cpu_times")
        if mem is None or cpu is None:  # gone, or not ours to read
            continue
        try:
            pgid = os.getpgid(proc.pid)
        except OSError:
            continue
        usage = Proc(proc.pid, int(mem.rss), float(cpu.user + cpu.system))
        table[proc.pid] = (info.get("ppid") or 0, pgid, usage)
    return table


def local_pass(roots: Mapping[str, int]) -> tuple[dict[str, list[Proc]], Memory]:
    """Each key's agent processes (``roots``: key -> the agent's pid) and this machine's
    memory, from one walk over the process table (``/proc``, else ``psutil``). A pid
    that is gone gives an empty list. Blocking: run it in a thread."""
    out: dict[str, list[Proc]] = {}
    if roots:
        table = proc_table()
        if table is None:
            table = psutil_table()
        wanted = set(roots.values())
        children: dict[int, list[int]] = {}
        groups: dict[int, list[int]] = {}
        for pid, (ppid, pgid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
            if pgid in wanted:
                groups.setdefault(pgid, []).append(pid)
        for key, root in roots.items():
            if root not in table:
                out[key] = []
                continue
            members = _members(root, children, groups)
            out[key] = [table[p][2] for p in sorted(members) if p in table]
    vm = psutil.virtual_memory()
    return out, Memory(int(vm.available), int(vm.total))


# ------------------------------------------------------------------ a worker host

#: Where a remote agent's wrapper names its process group (``agents/remote_launch.py``).
AGENT_PGID_GLOB = ".symphony/agent-*.pgid"

_PROC_AWK = (
    'BEGIN { n = split(want, w, " "); for (k = 1; k <= n; k++) W[w[k]] = 1 } '
    '{ s = $0; sub(/^.*\\) /, "", s); split(s, f, " "); '
    'if (f[3] in W) print "P", f[3], $1, f[22], f[12] + f[13] }'
)
_PS_AWK = 'BEGIN { n = split(want, w, " "); for (k = 1; k <= n; k++) W[w[k]] = 1 } ($1 in W) { print "S", $1, $2, $3, $4 }'
_MEM_AWK = (
    "/^MemAvailable:/ { a = $2 } /^MemTotal:/ { t = $2 } /^MemFree:/ { f = $2 } "
    "/^Buffers:/ { b = $2 } /^Cached:/ { c = $2 } "
    'END { if (a == "") a = f + b + c; print "M", a + 0, t + 0 }'
)


def host_script(workspaces: Sequence[str], *, use_proc: bool = True) -> str:
    """The ``sh`` script of one pass on a worker host for the runs whose workspaces (as
    the host names them) are ``workspaces``, in order. It prints ``G <index> <pgid>`` for
    each agent group found in workspace ``index``; the groups' members as ``P <pgid>
    <pid> <rss pages> <cpu ticks>`` (from ``/proc``, after a ``T <ticks per second>
    <page size>`` line) or ``S <pgid> <pid> <rss KiB> <cpu time>`` (from ``ps``, without
    ``/proc`` or with ``use_proc`` False); and ``M <available KiB> <total KiB>`` from
    ``/proc/meminfo`` when there is one. Exit 0."""
    words = " ".join(home_path(path) for path in workspaces)
    lines = [
        f"want=; i=0; set -- {words}",
        'for ws in "$@"; do '
        f'for f in "$ws"/{AGENT_PGID_GLOB}; do '
        '[ -f "$f" ] || continue; p=; read p < "$f"; '
        'case "$p" in ""|*[!0-9]*) continue;; esac; '
        'echo "G $i $p"; want="$want $p"; done; i=$((i+1)); done',
    ]
    members = (
        f'ps -A -o pgid= -o pid= -o rss= -o time= 2>/dev/null | awk -v want="$want" '
        f"{shlex.quote(_PS_AWK)}"
    )
    if use_proc:
        members = (
            "if [ -r /proc/self/stat ]; then "
            'echo "T $(getconf CLK_TCK 2>/dev/null || echo 100) '
            '$(getconf PAGESIZE 2>/dev/null || echo 4096)"; '
            f'cat /proc/[0-9]*/stat 2>/dev/null | awk -v want="$want" {shlex.quote(_PROC_AWK)}; '
            f"else {members}; fi"
        )
    lines.append(f'if [ -n "$want" ]; then {members}; fi')
    lines.append(f"[ -r /proc/meminfo ] && awk {shlex.quote(_MEM_AWK)} /proc/meminfo")
    lines.append("exit 0")
    return "; ".join(lines)


def cpu_time_s(text: str) -> float:
    """``ps``'s ``time`` field (``[[dd-]hh:]mm:ss``, seconds may have a fraction) in
    seconds; ``ValueError`` when it is not one."""
    days = 0
    if "-" in text:
        head, _, text = text.partition("-")
        days = int(head)
    parts = text.split(":")
    if not 1 <= len(parts) <= 3:
        raise ValueError(f"not a CPU time: {text!r}")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + float(part)
    return days * 86400 + seconds


def parse_ps_line(line: str) -> tuple[int, Proc] | None:
    """``<pgid> <pid> <rss KiB> <time>`` (``ps -o pgid=,pid=,rss=,time=``) as
    ``(pgid, Proc)``; None for a line that is not one."""
    fields = line.split()
    if len(fields) != 4:
        return None
    try:
        return int(fields[0]), Proc(int(fields[1]), int(fields[2]) * 1024, cpu_time_s(fields[3]))
    except ValueError:
        return None


def parse_host_output(text: str, count: int) -> tuple[dict[int, list[Proc]], Memory]:
    """What :func:`host_script` printed for ``count`` workspaces: workspace index ->
    its agent processes (an index without an agent group gets an empty list), and the
    host's memory. Lines that are none of the script's are passed over."""
    ticks, page = 100, 4096
    by_group: dict[int, list[Proc]] = {}
    where: dict[int, list[int]] = {i: [] for i in range(count)}
    memory = Memory(None, None)
    for raw in text.splitlines():
        fields = raw.split()
        if not fields:
            continue
        try:
            match fields[0]:
                case "G" if len(fields) == 3 and int(fields[1]) in where:
                    where[int(fields[1])].append(int(fields[2]))
                case "T" if len(fields) == 3:
                    ticks, page = max(1, int(fields[1])), max(1, int(fields[2]))
                case "P" if len(fields) == 5:
                    proc = Proc(int(fields[2]), int(fields[3]) * page, float(fields[4]) / ticks)
                    by_group.setdefault(int(fields[1]), []).append(proc)
                case "S":
                    parsed = parse_ps_line(raw[1:])
                    if parsed is not None:
                        by_group.setdefault(parsed[0], []).append(parsed[1])
                case "M" if len(fields) == 3:
                    available, total = int(fields[1]) * 1024, int(fields[2]) * 1024
                    memory = Memory(available or None, total or None)
        except ValueError:
            continue
    out = {
        index: [p for pgid in groups for p in by_group.get(pgid, ())]
        for index, groups in where.items()
    }
    return out, memory


def memory_text(n_bytes: int | None) -> str:
    """``812 MB``, ``1.9 GB`` (MiB and GiB, as ``free -h`` counts); ``-`` when unknown."""
    if n_bytes is None:
        return "-"
    if n_bytes < 1000 * MIB:
        return f"{n_bytes / MIB:.0f} MB"
    return f"{n_bytes / (1024 * MIB):.1f} GB"
