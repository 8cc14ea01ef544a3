package io.etcdlock.shedlock;

import static org.assertj.core.api.Assertions.assertThat;

import io.etcdlock.EtcdExtension;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.TestSupport;
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

    /** The record's lock_until_ms read with a plain jetcd client, or null if there is none. */
    private Long lockUntilMs(String lockName) {
        try {
            String raw = TestSupport.rawGet("__etcdlock/once/" + EtcdLockProvider.DEFAULT_PREFIX + "/" + lockName);
            return raw == null ? null : TwoInstancesTest.lockUntilMs(raw);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Override
    protected void assertUnlocked(String lockName) {
        Long until = lockUntilMs(lockName);
        assertThat(until == null || until <= ClockProvider.now().toEpochMilli()).describedAs("unlocked: %s", until).isTrue();
    }

    @Override
    protected void assertLocked(String lockName) {
        Long until = lockUntilMs(lockName);
        assertThat(until != null && until > ClockProvider.now().toEpochMilli()).describedAs("locked: %s", until).isTrue();
    }
}
