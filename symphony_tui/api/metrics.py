"""``GET /metrics``: the scheduler's state in the Prometheus text exposition format,
built by ``prometheus_client`` from the current snapshot at each scrape (a custom
collector: nothing is counted twice, nothing is kept between scrapes).

Metrics (all prefixed ``symphony_``): ``running_workers``, ``retrying_issues``,
``approvals_waiting``, ``dispatch_paused``, ``max_concurrent_agents``, ``tokens_total``
(label ``kind``: input, cached_input, output, reasoning, total; measured usage only, no
samples while nothing was measured but some run went unreported),
``runs_usage_not_reported_total`` (finished runs whose backend reported no usage),
``running_workers_usage_not_reported`` (runs in progress with none reported yet),
``spend_usd_total`` (US dollars of the priced usage since the usage ledger began; no sample
while nothing was priced), ``runs_unpriced_total`` (finished runs whose model had no price:
their spend is unknown, not in ``spend_usd_total``), ``run_spend_usd`` (labels ``issue``,
``host``: each running run's priced spend; no series for a run of an unknown model or
without a usage report),
``seconds_running_total``,
``token_rate_per_minute``, ``rate_limit_used_percent`` (labels ``window``: primary,
secondary, and ``limit``), ``tracker_up`` (0 while a tracker error shows),
``tracker_errors_total`` (failed tracker calls since start), ``config_ok``, and
``host_running_workers`` (label ``host``: the run's worker host when the snapshot names
one, else this machine), ``run_rss_bytes`` and ``run_cpu_percent`` (labels ``issue``,
``host``: each running agent's process tree at the last resource sample; a run's series
is gone once it ended), ``host_memory_available_bytes`` and ``host_agents_rss_bytes``
(label ``host``), and ``host_memory_short`` (1 while the host takes no new run for lack of
memory). See https://prometheus.io/docs/instrumenting/exposition_formats/.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from symphony_tui.domain import RunningRow, Snapshot

__all__ = ["CONTENT_TYPE_LATEST", "SnapshotCollector", "render"]


def run_host(row: RunningRow) -> str:
    """The host a run works on: the row's worker host field when the snapshot has one
    (remote worker hosts), else this machine's name."""
    for name in ("worker_host", "host"):
        value = getattr(row, name, None)
        if isinstance(value, str) and value:
            return value
    return socket.gethostname()


class SnapshotCollector(Collector):
    """Yields the metric families of ``snapshot()`` at each ``collect``."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator:
        snap = self._snapshot()

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"symphony_{name}", doc, value=value)

        yield gauge("running_workers", "Runs in progress.", len(snap.running))
        yield gauge("retrying_issues", "Issues waiting for a retry.", len(snap.retrying))
        yield gauge("approvals_waiting", "Approvals and questions waiting for the operator.",
                    len(snap.approvals))  # fmt: skip
        yield gauge("dispatch_paused", "1 while the operator paused dispatch.",
                    int(snap.dispatch_paused))  # fmt: skip
        yield gauge("max_concurrent_agents", "Configured agent slots.", snap.max_concurrent_agents)
        tokens = CounterMetricFamily(
            "symphony_tokens", "Tokens used since the usage ledger began.", labels=["kind"]
        )
        t = snap.totals
        live_unreported = sum(1 for r in snap.running if not r.usage_reported)
        # Zeros that only say "nobody reported" are left out: the counters below say it.
        measured = not t.is_zero or (snap.runs_not_reported == 0 and live_unreported == 0)
        if measured:
            for kind, value in (
                ("input", t.input_tokens),
                ("cached_input", t.cached_input_tokens),
                ("output", t.output_tokens),
                ("reasoning", t.reasoning_tokens),
                ("total", t.total_tokens),
            ):
                tokens.add_metric([kind], value)
        yield tokens
        yield CounterMetricFamily(
            "symphony_runs_usage_not_reported",
            "Finished runs whose backend reported no token usage (not counted in tokens).",
            value=snap.runs_not_reported,
        )
        yield gauge(
            "running_workers_usage_not_reported",
            "Runs in progress whose backend has reported no token usage yet.",
            live_unreported,
        )
        yield from _spend(snap)
        yield CounterMetricFamily(
            "symphony_seconds_running", "Agent running time, ended and live runs, in seconds.",
            value=snap.seconds_running,
        )  # fmt: skip
        yield gauge(
            "token_rate_per_minute", "Tokens over the last minute.", snap.token_rate_per_min
        )
        limits = GaugeMetricFamily(
            "symphony_rate_limit_used_percent",
            "The agent provider's rate-limit windows, percent used.",
            labels=["window", "limit"],
        )
        rl = snap.rate_limits
        if rl is not None:
            for window_name, window in (("primary", rl.primary), ("secondary", rl.secondary)):
                if window is not None and window.used_percent is not None:
                    limit = rl.limit_id or rl.limit_name or rl.source or ""
                    limits.add_metric([window_name, limit], window.used_percent)
        yield limits
        yield gauge("tracker_up", "0 while the last tracker call failed.",
                    int(snap.tracker_error is None))  # fmt: skip
        yield CounterMetricFamily(
            "symphony_tracker_errors", "Failed tracker calls since start.",
            value=snap.tracker_errors,
        )  # fmt: skip
        yield gauge(
            "config_ok", "0 while WORKFLOW.md has an error.", int(snap.config_error is None)
        )
        hosts = GaugeMetricFamily(
            "symphony_host_running_workers", "Runs in progress per worker host.", labels=["host"]
        )
        per_host: dict[str, int] = {}
        for row in snap.running:
            host = run_host(row)
            per_host[host] = per_host.get(host, 0) + 1
        if not per_host:
            per_host[socket.gethostname()] = 0
        for host, count in sorted(per_host.items()):
            hosts.add_metric([host], count)
        yield hosts
        yield from _memory(snap)


def _spend(snap: Snapshot) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
    """Spend in US dollars: the priced total, the runs without a price, each run's spend."""
    spend = CounterMetricFamily(
        "symphony_spend_usd",
        "US dollars of the priced token usage since the usage ledger began.",
    )
    if snap.totals.cost_usd is not None:
        spend.add_metric([], snap.totals.cost_usd)
    yield spend
    yield CounterMetricFamily(
        "symphony_runs_unpriced",
        "Finished runs whose model had no price (their spend is unknown, not in spend_usd).",
        value=snap.runs_unpriced,
    )
    per_run = GaugeMetricFamily(
        "symphony_run_spend_usd",
        "US dollars a running run spent so far (priced runs only).",
        labels=["issue", "host"],
    )
    for row in snap.running:
        if row.spend_usd is not None:
            per_run.add_metric([row.issue_identifier, run_host(row)], row.spend_usd)
    yield per_run


def _memory(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
    """Each running agent's memory and CPU, each machine's memory (the last sample)."""
    rss = GaugeMetricFamily(
        "symphony_run_rss_bytes",
        "Resident memory of a running agent and its children, in bytes.",
        labels=["issue", "host"],
    )
    cpu = GaugeMetricFamily(
        "symphony_run_cpu_percent",
        "CPU of a running agent and its children, percent of one core.",
        labels=["issue", "host"],
    )
    for row in snap.running:
        labels = [row.issue_identifier, run_host(row)]
        if row.rss_bytes is not None:
            rss.add_metric(labels, row.rss_bytes)
        if row.cpu_percent is not None:
            cpu.add_metric(labels, row.cpu_percent)
    yield rss
    yield cpu
    available = GaugeMetricFamily(
        "symphony_host_memory_available_bytes",
        "Memory a machine agents run on has available, in bytes.",
        labels=["host"],
    )
    agents = GaugeMetricFamily(
        "symphony_host_agents_rss_bytes",
        "Resident memory of the agents on a machine together, in bytes.",
        labels=["host"],
    )
    short = GaugeMetricFamily(
        "symphony_host_memory_short",
        "1 while a machine takes no new run for lack of memory.",
        labels=["host"],
    )
    for machine in snap.memory:
        host = [machine.host or socket.gethostname()]
        if machine.available_bytes is not None:
            available.add_metric(host, machine.available_bytes)
        agents.add_metric(host, machine.agents_rss_bytes)
        short.add_metric(host, int(machine.short is not None))
    yield available
    yield agents
    yield short


def render(snapshot: Callable[[], Snapshot]) -> bytes:
    """The text exposition of one scrape (a fresh registry: no process-wide state)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return generate_latest(registry)
