package io.etcdlock;

import org.junit.jupiter.api.Test;

/**
 * The conformance table once more, against the in-process etcd ({@code mem://conformance}):
 * every case listed for Java but those marked {@code etcd_only} (they kill etcd), including the
 * {@code mem_only} ones (the store's fault controls); a case with a private etcd gets a store of
 * its own, {@code mem://conf-ID}, which its {@code etcd} pause and resume silence and resume. See
 * {@link ConformanceTest}; this run prints {@code conformance: N of M cases ran for java (mem)}.
 * A class of its own, needing no etcd: {@code -Dtest=ConformanceTest} (the arm64 clean room)
 * runs the etcd run alone, as the other languages' clean-room runs do.
 */
class ConformanceMemTest {
    @Test
    void conformanceTableMem() throws Exception {
        ConformanceTest.table(true);
    }
}
