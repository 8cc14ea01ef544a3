package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A multi-lock has a guard's loss and renewal API: {@link MultiLockGuard#onLost} is called
 * once with the name and reason of the first lock lost, {@link MultiLockGuard#renewal} and
 * {@link MultiLockGuard#onRenewal} follow the one session every lock is held on.
 */
@ExtendWith(EtcdExtension.class)
class MultiLockLossTest {
    static EtcdLockClient a;

    @BeforeAll
    static void connect() {
        a = client();
    }

    @AfterAll
    static void close() {
        a.close();
    }

    @Test
    void onLostIsCalledOnceWithTheLostNameAndWhy() throws Exception {
        String base = uniqueName("multi-lost");
        List<String> names = List.of(base + "-a", base + "-b", base + "-c");
        MultiLockGuard m = a.newMultiLock(names).acquire(Duration.ofSeconds(5));
        assertEquals(Renewal.OK, m.renewal());
        List<String> renewals = new ArrayList<>();
        m.onRenewal(r -> renewals.add(r.toString()));
        List<Map.Entry<String, LossReason>> calls = new ArrayList<>();
        CountDownLatch lost = new CountDownLatch(1);
        m.onLost((name, why) -> {
            synchronized (calls) {
                calls.add(Map.entry(name, why));
            }
            lost.countDown();
        });
        raw().getKVClient().delete(bs(m.keys().get(1))).get(5, TimeUnit.SECONDS);
        assertTrue(lost.await(10, TimeUnit.SECONDS), "loss listener called");
        assertFalse(m.isHeld());
        assertEquals(Optional.of(Map.entry(base + "-b", LossReason.KEY_DELETED)), m.lost());
        // A listener added after the loss is called at once, on this thread, with the same loss.
        List<Map.Entry<String, LossReason>> late = new ArrayList<>();
        m.onLost((name, why) -> late.add(Map.entry(name, why)));
        assertEquals(List.of(Map.entry(base + "-b", LossReason.KEY_DELETED)), late);
        assertThrows(LockLostException.class, m::close);
        synchronized (calls) {
            assertEquals(List.of(Map.entry(base + "-b", LossReason.KEY_DELETED)), calls, "called exactly once");
        }
        assertEquals(List.of(), renewals, "the renewal never failed");
        assertThrows(InvalidArgumentException.class, () -> m.onLost(null));
        assertThrows(InvalidArgumentException.class, () -> m.onRenewal(null));
    }

    @Test
    void aReleaseIsNoLoss() throws Exception {
        String base = uniqueName("multi-released");
        MultiLockGuard m = a.newMultiLock(List.of(base + "-a", base + "-b")).acquire(Duration.ofSeconds(5));
        List<String> calls = new ArrayList<>();
        m.onLost((name, why) -> calls.add(name));
        m.close();
        assertFalse(m.isHeld());
        assertEquals(Optional.empty(), m.lost());
        assertEquals(Renewal.OK, m.renewal(), "a released multi-lock reads as renewing");
        // Released, the watcher ends: another guard's loss on those names is not ours.
        try (LockGuard g = a.newLock(base + "-a").acquire(Duration.ofSeconds(5))) {
            assertTrue(g.isHeld());
        }
        assertEquals(List.of(), calls);
    }
}
