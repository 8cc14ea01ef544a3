package io.etcdlock.demo.spring;

import java.util.UUID;
import java.util.concurrent.locks.Lock;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.SpringBootVersion;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.event.EventListener;
import org.springframework.integration.support.locks.LockRegistry;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

import io.etcdlock.EtcdLock;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;
import io.etcdlock.demo.StockServer;

/**
 * Seed 001's Spring Boot stock service on etcdlock-spring. The {@link LockRegistry} and the
 * {@link EtcdLockClient} come from the auto-configuration ({@code etcdlock.*} properties);
 * the stock is read and written in etcd through the lock's guarded get/put.
 */
@SpringBootApplication
public class StockApplication {

    public static void main(String[] args) {
        java.util.logging.Logger.getLogger("").setLevel(java.util.logging.Level.WARNING); // Tomcat's JUL chatter
        ConfigurableApplicationContext ctx = SpringApplication.run(StockApplication.class, args);
        // Stop when the parent (the load generator) closes our stdin.
        Thread watcher = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // ignore input
                }
            } catch (Exception ignored) {
                // stdin gone
            }
            System.exit(SpringApplication.exit(ctx));
        }, "stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    /**
     * Tell the launcher which Boot runs this and where it listens. (Not Boot 3's
     * WebServerInitializedEvent: Boot 4 moved it; this source builds on both.)
     */
    @EventListener
    public void onReady(ApplicationReadyEvent e) {
        System.out.println("BOOT " + SpringBootVersion.getVersion());
        System.out.println("LISTENING " + e.getApplicationContext().getEnvironment().getProperty("local.server.port"));
        System.out.flush();
    }

    /** The seed's StockController, without the hand-written jetcd lock. */
    @RestController
    public static class StockController {
        private final LockRegistry registry;
        private final EtcdLockClient client;
        private final boolean useLock;
        private final boolean requireVirtual;

        public StockController(LockRegistry registry, EtcdLockClient client, @Value("${stock.lock:true}") boolean useLock,
                @Value("${stock.require-virtual-threads:false}") boolean requireVirtual) {
            this.registry = registry;
            this.client = client;
            this.useLock = useLock;
            this.requireVirtual = requireVirtual;
        }

        @GetMapping("/stock/reduce")
        public String reduceStock() {
            // The virtual-thread test runs the app with spring.threads.virtual.enabled=true and
            // this check on: a request served by a platform thread is an error it counts.
            if (requireVirtual && !Thread.currentThread().toString().startsWith("VirtualThread")) {
                throw new IllegalStateException("not on a virtual thread: " + Thread.currentThread());
            }
            if (!useLock) {
                // Lock switched off: every request locks a name of its own (no exclusion).
                try (LockGuard own = client.newLock("stock-demo/nolock/" + UUID.randomUUID()).acquire()) {
                    return StockServer.sellOne(own);
                }
            }
            Lock lock = registry.obtain("lock");
            lock.lock();
            try {
                return StockServer.sellOne(((EtcdLock) lock).guard());
            } finally {
                lock.unlock();
            }
        }
    }
}
