from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager


def figure(name: str, value: float, unit: str, target: str = "") -> None:
    extra = f"   (target {target})" if target else ""
    print(f"{name:<52} {value:>12,.2f} {unit}{extra}")


@contextmanager
def timer() -> Callable[[], float]:
    start = time.perf_counter()
    elapsed = [0.0]
    yield lambda: elapsed[0]
    elapsed[0] = time.perf_counter() - start
