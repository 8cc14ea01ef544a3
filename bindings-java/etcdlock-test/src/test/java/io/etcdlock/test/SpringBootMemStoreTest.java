package io.etcdlock.test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.ContextConfiguration;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;
import io.etcdlock.LossReason;
import io.etcdlock.MemStore;
import io.etcdlock.test.spring.MemStoreInitializer;

/**
 * A Spring Boot test as a user writes one: the starter's client on an in-process store
 * ({@link MemStoreInitializer}), the store injected to act on it, and a store a test left silent
 * answering again in the next test ({@code MemStoreTestExecutionListener}).
 */
@SpringBootTest(properties = "etcdlock.request-timeout=1s")
@ContextConfiguration(initializers = MemStoreInitializer.class)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SpringBootMemStoreTest {
    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class App {
    }

    @Autowired
    EtcdLockClient client;

    @Autowired
    MemStore store;

    @Test
    @Order(1)
    void theStartersClientIsOnTheStoreAndTheJobStopsOnLoss() throws Exception {
        assertEquals(store.endpoint(), client.endpoints());
        assertTrue(store.name().startsWith("spring-"), store.name());
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        CompletableFuture<LossReason> stopped = JobLossTest.started(new ReportJob(client, lines::add), lines);
        assertTrue(store.expireLease(store.keys("report/").get(0).lease()));
        assertEquals(LossReason.LEASE_EXPIRED, stopped.get(5, TimeUnit.SECONDS));
    }

    @Test
    @Order(2)
    void aTestMayLeaveTheStoreSilent() {
        store.silence(Duration.ofHours(1));
    }

    @Test
    @Order(3)
    void theNextTestFindsItAnswering() {
        try (LockGuard g = client.newLock("job").acquire(Duration.ofSeconds(2))) {
            assertTrue(g.isHeld());
        }
    }
}
