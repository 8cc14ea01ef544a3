"""etcdlock.prometheus.Collector in a prometheus_client registry: the scrape
parses, with core's family names, the labels given and the live values; and
the client's own exposition text reads, with prometheus_client's parser, as
exactly the families and types it declares."""

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


def test_exposition_parses_into_exactly_the_declared_families(endpoints: List[str], name: str) -> None:
    """prometheus_client's parser reads every sample of ``Client.prometheus()``
    into the family its ``# TYPE`` line declares, with that type: a sample its
    type does not allow (a ``_sum`` under a counter) would come out as a family
    of its own, of type ``unknown``."""
    with etcdlock.Client(endpoints) as c:
        with c.lock(name):
            pass
        text = c.prometheus(service="orders")
    declared = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ")
            # The parser names a counter's family without its "_total".
            declared[family[: -len("_total")] if kind == "counter" and family.endswith("_total") else family] = kind
    families = list(text_string_to_metric_families(text))
    assert {f.name: f.type for f in families} == declared
    assert len(families) == len(declared) == 8
    assert all(f.samples for f in families), [f.name for f in families if not f.samples]
    hold = next(f for f in families if f.name == "etcdlock_hold_seconds")
    assert hold.type == "summary"
    counts = {s.name: s.value for s in hold.samples}
    assert counts["etcdlock_hold_seconds_count"] == 1.0 and counts["etcdlock_hold_seconds_sum"] >= 0.0, counts
