"""A ``prometheus_client`` collector over etcdlock's metrics (the
``etcdlock[prometheus]`` extra):

    from prometheus_client import REGISTRY, start_http_server
    from etcdlock.prometheus import Collector

    REGISTRY.register(Collector(client, service="orders"))
    start_http_server(9100)

The families and their names are core's one list (``etcdlock_acquire_seconds``,
``etcdlock_held``, ``etcdlock_lost_total``, ...), the same that Java's
Micrometer binder and ``etcdlock run --metrics-listen`` expose; ``labels`` go
on every series. Each scrape reads the client's counters (no etcd request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Union

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from ._asyncio import AsyncClient
    from ._client import Client


class Collector:
    """Collects ``client``'s metrics at each scrape (a custom collector:
    ``registry.register(Collector(client))``)."""

    def __init__(self, client: "Union[Client, AsyncClient]", **labels: str) -> None:
        self._client = client
        self._labels = labels

    def collect(self) -> Iterator[Metric]:
        if self._client.closed:
            return
        yield from text_string_to_metric_families(self._client.prometheus(**self._labels))

    def describe(self) -> Iterator[Metric]:
        # Families appear with the first scrape; nothing to check in advance.
        return iter(())
