package io.etcdlock.reactor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import io.etcdlock.EtcdExtension;
import io.etcdlock.EtcdLockClient;
import reactor.core.publisher.Mono;

/**
 * The Reactor example of docs/lang/java.md, run as a copy here (modulo the endpoints and a namespace)
 * with assertions; ReadmeBlocksTest runs the page's block itself and checks what it prints.
 */
@ExtendWith(EtcdExtension.class)
class ReadmeExampleTest {
    @Test
    void readmeReactor() {
        String ns = "readme-rx-" + System.nanoTime() + "/";
        try (EtcdLockClient client = EtcdLockClient.builder().endpoints(EtcdExtension.endpoints()).namespace(ns)
                .build()) {
            ReactiveEtcdLock locks = ReactiveEtcdLock.of(client);

            // Decrement the stock under the lock; released when the Mono ends, however it ends.
            Mono<Integer> left = locks.withLock("stock", Duration.ofSeconds(5), guard -> Mono.fromCallable(() -> {
                String v = guard.get("inventory/stock");
                int stock = v == null ? 300 : Integer.parseInt(v);
                guard.put("inventory/stock", Integer.toString(stock - 1)); // rejected by etcd if the lock was lost
                return stock - 1;
            }));
            System.out.println("stock left: " + left.block());
            assertEquals(298, left.block()); // the Mono is cold: a second subscription decrements again

            // Lead while subscribed: blockFirst takes the first term, then cancels, which stops the loop and resigns.
            LeaderEvent elected = locks.leadership("scheduler", "node-1")
                    .filter(e -> e.kind() == LeaderEvent.Kind.ELECTED)
                    .blockFirst(Duration.ofSeconds(10));
            System.out.println("elected, fencing token > 0: " + (elected.term().get().fencingToken() > 0));
            assertTrue(elected.term().get().fencingToken() > 0);
        }
    }
}
