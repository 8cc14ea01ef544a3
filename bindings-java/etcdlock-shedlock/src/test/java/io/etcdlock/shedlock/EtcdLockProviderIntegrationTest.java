package io.etcdlock.shedlock;

import static org.assertj.core.api.Assertions.assertThat;

import io.etcdlock.EtcdExtension;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.TestSupport;
import java.nio.charset.StandardCharsets;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.test.support.AbstractExtensibleLockProviderIntegrationTest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * ShedLock's own provider suite (shedlock-test-support, unmodified) against the real etcd of
 * the testkit harness. assertLocked/assertUnlocked read the stored record with a plain jetcd
 * client, independently of the provider.
 */
@ExtendWith(EtcdExtension.class)
class EtcdLockProviderIntegrationTest extends AbstractExtensibleLockProviderIntegrationTest {
    private EtcdLockClient client;
    private EtcdLockProvider provider;

    @Override
    protected synchronized ExtensibleLockProvider getLockProvider() {
        if (provider == null) {
            client = TestSupport.client();
            provider = new EtcdLockProvider(client);
        }
        return provider;
    }

    @AfterEach
    synchronized void closeClient() {
        if (client != null) {
            client.close();
        }
    }

    private LockRecord record(String lockName) {
        try {
            String raw = TestSupport.rawGet(EtcdLockProvider.DEFAULT_PREFIX + "/state/" + lockName);
            return raw == null ? null : LockRecord.parse(raw.getBytes(StandardCharsets.UTF_8));
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Override
    protected void assertUnlocked(String lockName) {
        LockRecord r = record(lockName);
        assertThat(r == null || !r.isLockedAt(ClockProvider.now())).describedAs("unlocked: %s", r).isTrue();
    }

    @Override
    protected void assertLocked(String lockName) {
        LockRecord r = record(lockName);
        assertThat(r != null && r.isLockedAt(ClockProvider.now())).describedAs("locked: %s", r).isTrue();
    }
}
