"""etcdlock.prometheus.Collector in a prometheus_client registry: the scrape
parses, with core's family names, the labels given and the live values."""

from __future__ import annotations

from typing import List

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import etcdlock
from etcdlock.prometheus import Collector


def scrape(reg: CollectorRegistry) -> dict:
    out = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_collector_exposes_core_metrics_with_labels(endpoints: List[str], name: str) -> None:
    reg = CollectorRegistry()
    with etcdlock.Client(endpoints) as c:
        reg.register(Collector(c, service="orders"))
        with c.lock(name):
            s = scrape(reg)
            assert s[("etcdlock_held", (("service", "orders"),))] == 1.0
        s = scrape(reg)
        assert s[("etcdlock_held", (("service", "orders"),))] == 0.0
        acquired = [v for (n, l), v in s.items() if n == "etcdlock_acquire_seconds_count" and ("result", "acquired") in l]
        assert acquired == [1.0]
        assert {n for n, _ in s} >= {"etcdlock_waiting", "etcdlock_keepalive_total", "etcdlock_hold_seconds_count"}, sorted({n for n, _ in s})
    # A closed client contributes nothing (and does not fail the scrape).
    assert not [n for n, _ in scrape(reg) if n.startswith("etcdlock_")]
