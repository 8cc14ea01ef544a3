package io.etcdlock.spring;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import io.etcdlock.EtcdExtension;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.InvalidArgumentException;
import io.etcdlock.LockGuard;
import io.etcdlock.LockLostException;
import io.etcdlock.LockTimeoutException;

/** {@link Locked} on bean methods, in two Spring contexts (two clients, two sessions) on real etcd. */
@ExtendWith(EtcdExtension.class)
class LockedTest {
    /** The shared resource: a plain read-modify-write, correct only under the lock. */
    static final int[] STOCK = new int[1];
    static final AtomicInteger INSIDE = new AtomicInteger();
    static final AtomicInteger MOST_INSIDE = new AtomicInteger();

    public static class Shop {
        @Locked("locked-stock")
        public void sell() throws InterruptedException {
            MOST_INSIDE.accumulateAndGet(INSIDE.incrementAndGet(), Math::max);
            int seen = STOCK[0];
            Thread.sleep(1);
            STOCK[0] = seen + 1;
            INSIDE.decrementAndGet();
        }

        @Locked(value = "locked-order", key = "#p0")
        public boolean ship(long orderId, EtcdLockClient other) {
            // Inside, this order's lock is taken and another order's is free.
            boolean mineTaken = other.tryAcquire("locked-order:" + orderId).isEmpty();
            var free = other.tryAcquire("locked-order:" + (orderId + 1));
            free.ifPresent(LockGuard::close);
            return mineTaken && free.isPresent();
        }

        @Locked(value = "locked-busy", timeout = "300ms")
        public void busy(AtomicInteger ran) {
            ran.incrementAndGet();
        }

        @Locked(value = "locked-lost")
        public String lose(EtcdLockClient client) throws InterruptedException {
            long token = client.status("locked-lost").holders().get(0).fencingToken();
            assertTrue(client.release("locked-lost", token), "released by token from outside");
            return "returned";
        }

        @Locked(value = "locked-bad", key = "#nope.length()")
        public void badKey() {}

        @Locked(value = "locked-bad", timeout = "soon")
        public void badTimeout() {}
    }

    @Configuration(proxyBeanMethods = false)
    static class ShopConfig {
        @Bean
        Shop shop() {
            return new Shop();
        }
    }

    ApplicationContextRunner runner() {
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(EtcdLockAutoConfiguration.class))
                .withUserConfiguration(ShopConfig.class)
                .withPropertyValues("etcdlock.endpoints=" + String.join(",", EtcdExtension.endpoints()),
                        "etcdlock.ttl=5s");
    }

    @Test
    void twoInstancesRunTheMethodOneAtATime() {
        STOCK[0] = 0;
        INSIDE.set(0);
        MOST_INSIDE.set(0);
        runner().run(a -> runner().run(b -> {
            List<Thread> threads = new ArrayList<>();
            List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
            for (Shop shop : List.of(a.getBean(Shop.class), b.getBean(Shop.class))) {
                for (int t = 0; t < 4; t++) {
                    threads.add(new Thread(() -> {
                        try {
                            for (int i = 0; i < 25; i++) {
                                shop.sell();
                            }
                        } catch (Throwable e) {
                            errors.add(e);
                        }
                    }));
                }
            }
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join();
            }
            assertEquals(List.of(), errors);
            assertEquals(200, STOCK[0], "every sale counted");
            assertEquals(1, MOST_INSIDE.get(), "never two callers inside at once");
            assertTrue(a.getBean(EtcdLockClient.class).status("locked-stock").holders().isEmpty(), "released");
        }));
    }

    @Test
    void aKeyMakesOneLockPerArgument() {
        runner().run(ctx -> {
            try (EtcdLockClient other = EtcdLockClient.builder().endpoints(EtcdExtension.endpoints()).build()) {
                assertTrue(ctx.getBean(Shop.class).ship(42, other));
            }
        });
    }

    @Test
    void aTimeoutThatRunsOutThrowsAndTheMethodDoesNotRun() {
        runner().run(ctx -> {
            try (EtcdLockClient other = EtcdLockClient.builder().endpoints(EtcdExtension.endpoints()).build();
                    LockGuard held = other.acquire("locked-busy")) {
                AtomicInteger ran = new AtomicInteger();
                long t0 = System.nanoTime();
                assertThrows(LockTimeoutException.class, () -> ctx.getBean(Shop.class).busy(ran));
                long ms = (System.nanoTime() - t0) / 1_000_000;
                assertEquals(0, ran.get());
                assertTrue(ms >= 250 && ms < 3000, "gave up after " + ms + " ms (timeout 300ms)");
            }
        });
    }

    @Test
    void aHoldLostWhileTheMethodRanIsReportedAfterItReturns() {
        runner().run(ctx -> {
            EtcdLockClient client = ctx.getBean(EtcdLockClient.class);
            LockLostException e = assertThrows(LockLostException.class, () -> ctx.getBean(Shop.class).lose(client));
            assertNotNull(e.getMessage());
            assertTrue(client.status("locked-lost").holders().isEmpty());
        });
    }

    @Test
    void badKeysAndTimeoutsAreInvalidArguments() {
        runner().run(ctx -> {
            Shop shop = ctx.getBean(Shop.class);
            assertThrows(InvalidArgumentException.class, shop::badKey);
            assertThrows(InvalidArgumentException.class, shop::badTimeout);
        });
        assertEquals(Duration.ofMillis(500), LockedInterceptor.timeout("500ms"));
        assertEquals(Duration.ofSeconds(5), LockedInterceptor.timeout("5"));
        assertEquals(Duration.ofMinutes(2), LockedInterceptor.timeout("2m"));
        assertEquals(Duration.ofSeconds(5), LockedInterceptor.timeout("PT5S"));
        assertNull(LockedInterceptor.timeout(""));
    }

    @Test
    void itCanBeSwitchedOff() {
        runner().withPropertyValues("etcdlock.locked.enabled=false").run(ctx -> {
            assertFalse(org.springframework.aop.support.AopUtils.isAopProxy(ctx.getBean(Shop.class)));
        });
        runner().run(ctx -> assertTrue(org.springframework.aop.support.AopUtils.isAopProxy(ctx.getBean(Shop.class))));
    }
}
