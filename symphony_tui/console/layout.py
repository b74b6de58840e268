"""How the main screen shares its height between the tables and the log (pure).

A fixed quarter of the screen per table would show six issues next to three workers as
five issue rows at 120x36 and two at 80x24. So the two tables together take what they
need, up to ``TABLES_SHARE`` of the height (the log and token panes keep the rest),
and share it by max-min fairness: a table that fits in half gets exactly what it needs and
the other takes the rest; when neither fits, they split evenly.
"""

from __future__ import annotations

# border (2) + header (1): what a table costs before its first row
TABLE_CHROME = 3
MIN_TABLE = TABLE_CHROME + 1
TABLES_SHARE = 0.6
MIN_BOTTOM = 6


def tables_height(total: int, rows_a: int, rows_b: int) -> int:
    """Height of both tables together out of ``total`` rows for the tables and the
    bottom panes: what they need, at most ``TABLES_SHARE`` of ``total``, at least one row
    each while the bottom keeps ``MIN_BOTTOM``."""
    total = max(total, 0)
    need = 2 * TABLE_CHROME + max(rows_a, 1) + max(rows_b, 1)
    height = min(need, int(total * TABLES_SHARE))
    return max(0, min(max(height, 2 * MIN_TABLE), total - MIN_BOTTOM))


def table_heights(total: int, rows_a: int, rows_b: int) -> tuple[int, int]:
    """Heights (in cells) of two stacked tables sharing ``total`` rows, holding
    ``rows_a`` and ``rows_b`` data rows. Each gets at least ``MIN_TABLE`` (one row) when
    ``total`` allows; the two always add up to ``total`` (never below zero)."""
    total = max(total, 0)
    need_a = TABLE_CHROME + max(rows_a, 1)
    need_b = TABLE_CHROME + max(rows_b, 1)
    half = total // 2
    if need_a + need_b <= total or need_b <= half:
        b = need_b
    elif need_a <= total - half:
        b = total - need_a
    else:
        b = half
    b = min(max(b, min(MIN_TABLE, total // 2)), total - min(MIN_TABLE, total - total // 2))
    return total - b, b
