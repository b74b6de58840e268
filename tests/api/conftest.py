from tests.scheduler.conftest import make_harness  # noqa: F401  (shared fixture)
