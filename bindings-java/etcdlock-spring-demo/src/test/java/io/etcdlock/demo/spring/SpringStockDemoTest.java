package io.etcdlock.demo.spring;

import static org.junit.jupiter.api.Assertions.*;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.etcdlock.demo.DemoEtcd;
import io.etcdlock.demo.StockDemo;

/**
 * The Spring Boot stock service: two app instances, 500 requests, stock 300, real etcd, on
 * virtual threads and with the lock switched off (the plain case is BootAppTest's, run on Boot
 * 3 here and on Boot 4 by etcdlock-spring-boot4-app).
 */
class SpringStockDemoTest {
    static DemoEtcd etcd;

    @BeforeAll
    static void start() throws Exception {
        etcd = DemoEtcd.start();
    }

    @AfterAll
    static void stop() throws Exception {
        etcd.close();
    }

    /**
     * Two instances on virtual threads (Boot 3, {@code spring.threads.virtual.enabled=true}, 2
     * carrier threads): every request is served on a virtual thread and waits for the lock
     * without pinning its carrier. The apps run on a JDK 21+ found through Maven's toolchains
     * or among the installed JDKs ({@link Toolchains}); the tests themselves on whatever JDK runs
     * Maven (17 is fine). With no such JDK found the test is skipped with a message saying how to declare one, except
     * under {@code -Detcdlock.require-jdk21=true} (bindings-java/test.sh, so CI), where it fails.
     */
    @Test
    void onVirtualThreadsTwoInstancesSellExactlyTheStock() throws Exception {
        java.util.Optional<String> found = Toolchains.jdk(21);
        String how = "no JDK >= 21 in Maven's toolchains (~/.m2/toolchains.xml, a <toolchain> of type jdk with"
                + " <version>21</version> or newer and its <jdkHome>), none installed in /usr/lib/jvm, /opt/java,"
                + " ~/.sdkman or ~/.jdks, nor -Detcdlock.jdk21=<JDK home>";
        if (found.isEmpty()) {
            assertFalse(Boolean.getBoolean("etcdlock.require-jdk21"), how);
            org.junit.jupiter.api.Assumptions.abort(how);
        }
        String jdk = found.get();
        StockDemo.Result r = StockDemo.run(etcd.endpoints(), 300, 500, true,
                (eps, useLock) -> SpringStockDemo.startApp(eps, useLock, jdk, true));
        System.out.println("Spring Boot on virtual threads with the lock: " + r);
        assertEquals(0, r.errors, r.toString());
        assertEquals(300, r.sold, r.toString());
        assertEquals(0, r.finalStock, r.toString());
        assertEquals(0, r.oversold(), r.toString());
    }

    @Test
    void withTheLockSwitchedOffTheyOversell() throws Exception {
        StockDemo.Result r = StockDemo.run(etcd.endpoints(), 300, 500, false, SpringStockDemo::startApp);
        System.out.println("Spring Boot, lock off: " + r);
        assertEquals(0, r.errors, r.toString());
        assertTrue(r.oversold() > 0, r.toString());
    }
}
