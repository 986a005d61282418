from tests.collectors.helpers import no_leftover_workers  # noqa: F401 (a fixture)
