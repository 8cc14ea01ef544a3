package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@link EtcdLockClient#metrics()} against real etcd: the core's snapshot, decoded by field name. */
@ExtendWith(EtcdExtension.class)
class MetricsTest {
    /**
     * A dead endpoint listed before the live ones, with a lazy connect (an eager one probes every
     * member at once and keeps the first to answer, so whether the dead one's refusal counts
     * first is a race): the session's first request fails on it once and moves to a live member,
     * which every later request uses: 0 after connecting, 1 after a lock and its release.
     */
    @Test
    void aDeadMemberCountsOneMemberFailure() throws Exception {
        List<String> endpoints = new ArrayList<>();
        // Port 1: nothing listens there, and no free-port pick hands it to another process.
        endpoints.add("127.0.0.1:1");
        endpoints.addAll(EtcdExtension.endpoints());
        String name = uniqueName("member-failures");
        try (EtcdLockClient c = EtcdLockClient.builder().endpoints(endpoints).ttl(Duration.ofSeconds(10)).lazyConnect(true).build();
                EtcdLockClient healthy = client()) {
            long afterConnect = c.metrics().memberFailures();
            try (LockGuard g = c.newLock(name).acquire()) {
                assertTrue(g.isHeld());
            }
            Metrics m = c.metrics();
            assertEquals(List.of(0L, 1L), List.of(afterConnect, m.memberFailures()));
            assertEquals(1, m.count(Metrics.Result.ACQUIRED));
            assertEquals(1, m.holdsEnded());
            assertEquals(0, healthy.metrics().memberFailures());
        }
    }
}
