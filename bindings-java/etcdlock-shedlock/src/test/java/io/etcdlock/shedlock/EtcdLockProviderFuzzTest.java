package io.etcdlock.shedlock;

import io.etcdlock.EtcdExtension;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.TestSupport;
import net.javacrumbs.shedlock.test.support.FuzzTester;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * ShedLock's own FuzzTester (8 threads, 2 jobs, a non-atomic counter each) on one provider; the
 * suite's own fuzz test is @Disabled there, so it runs here.
 */
@ExtendWith(EtcdExtension.class)
class EtcdLockProviderFuzzTest {
    @Test
    void fuzzTestShouldPass() throws Exception {
        try (EtcdLockClient client = TestSupport.client()) {
            new FuzzTester(new EtcdLockProvider(client, "shedlock-fuzz")).doFuzzTest();
        }
    }
}
