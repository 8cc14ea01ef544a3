package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.lock.LockResponse;

/**
 * etcdlock and jetcd's Lock client (etcd's server-side v3lock, the seeds' route 2) use the
 * same key layout, so they exclude each other on one name.
 */
@ExtendWith(EtcdExtension.class)
class JetcdInteropTest {

    @Test
    void etcdlockAndJetcdLockExcludeEachOther() throws Exception {
        String name = uniqueName("jetcd-interop");
        long lease = raw().getLeaseClient().grant(30).get(10, TimeUnit.SECONDS).getID();
        try (EtcdLockClient c = client()) {
            // jetcd holds: etcdlock must not get it.
            ByteSequence jkey = raw().getLockClient().lock(bs(name), lease).get(10, TimeUnit.SECONDS).getKey();
            assertFalse(c.tryAcquire(name).isPresent());
            assertThrows(LockTimeoutException.class, () -> c.acquire(name, Duration.ofMillis(300)));
            raw().getLockClient().unlock(jkey).get(10, TimeUnit.SECONDS);

            // etcdlock holds: jetcd waits until we release.
            LockGuard g = c.acquire(name, Duration.ofSeconds(5));
            CompletableFuture<LockResponse> waiting = raw().getLockClient().lock(bs(name), lease);
            awaitKeys(name, 2, Duration.ofSeconds(5));
            assertFalse(waiting.isDone(), "jetcd's lock waits while etcdlock holds");
            long ourToken = g.fencingToken();
            g.close();
            LockResponse r = waiting.get(10, TimeUnit.SECONDS);
            assertTrue(r.getKey().toString().startsWith(name + "/"));
            raw().getLockClient().unlock(r.getKey()).get(10, TimeUnit.SECONDS);
            try (LockGuard again = c.acquire(name, Duration.ofSeconds(5))) {
                assertTrue(again.fencingToken() > ourToken);
            }
        } finally {
            raw().getLeaseClient().revoke(lease).get(10, TimeUnit.SECONDS);
        }
    }
}
