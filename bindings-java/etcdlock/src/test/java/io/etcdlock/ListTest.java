package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Collectors;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@code list} (every lock under a prefix, with kind, holder and local queue) and {@code release} by fencing token. */
@ExtendWith(EtcdExtension.class)
class ListTest {
    @Test
    void listShowsEveryKindWithLanguageAndLocalQueue() throws Exception {
        try (EtcdLockClient a = client(); EtcdLockClient b = client()) {
            String name = uniqueName("fleet");
            LockGuard held = a.acquire(name + "/mutex");
            List<CompletableFuture<Void>> waits = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                waits.add(b.acquireAsync(name + "/mutex", Duration.ofSeconds(30)).thenAccept(LockGuard::unlock));
            }
            Leadership leader = a.campaign(name + "/election", "node-a");
            LockGuard permit = a.acquirePermit(name + "/sem", 3, Duration.ofSeconds(10));
            LockGuard reader = a.acquireRead(name + "/rw", Duration.ofSeconds(10));
            await("every kind and the local queue in the meta records", Duration.ofSeconds(10), () -> {
                List<LockStatus> l = a.list(name + "/");
                return l.size() == 4
                        && l.stream().allMatch(s -> s.lockKind().isPresent())
                        && l.stream().anyMatch(s -> s.waiters().stream().anyMatch(w -> w.localWaiters().equals(OptionalInt.of(5))));
            });
            List<LockStatus> l = a.list(name + "/");
            assertEquals(List.of(name + "/election", name + "/mutex", name + "/rw", name + "/sem"),
                    l.stream().map(LockStatus::name).collect(Collectors.toList()));
            Map<String, LockStatus> by = l.stream().collect(Collectors.toMap(LockStatus::name, Function.identity()));
            LockStatus m = by.get(name + "/mutex");
            assertEquals(LockStatus.LockKind.MUTEX, m.lockKind().orElseThrow());
            assertEquals(1, m.holders().size());
            assertEquals(2, m.waiters().size());
            assertEquals(held.fencingToken(), m.holders().get(0).fencingToken());
            assertEquals("java", m.holders().get(0).language().orElseThrow());
            assertEquals((int) ProcessHandle.current().pid(), m.holders().get(0).pid().getAsInt());
            assertFalse(m.holders().get(0).foreign());
            assertEquals(LockStatus.LockKind.ELECTION, by.get(name + "/election").lockKind().orElseThrow());
            assertEquals("node-a", new String(by.get(name + "/election").holders().get(0).value(), StandardCharsets.UTF_8));
            assertEquals(LockStatus.LockKind.SEMAPHORE, by.get(name + "/sem").lockKind().orElseThrow());
            assertEquals(LockStatus.LockKind.RWLOCK, by.get(name + "/rw").lockKind().orElseThrow());
            held.unlock();
            for (CompletableFuture<Void> w : waits) {
                w.get(30, TimeUnit.SECONDS);
            }
            leader.resign();
            permit.unlock();
            reader.unlock();
            await("nothing left", Duration.ofSeconds(10), () -> a.list(name + "/").isEmpty());
        }
    }

    @Test
    void releaseByTokenTellsTheWedgedHolder() throws Exception {
        try (EtcdLockClient holder = client(); EtcdLockClient admin = client()) {
            String name = uniqueName("wedged");
            LockGuard g = holder.acquire(name);
            CompletableFuture<LossReason> lost = new CompletableFuture<>();
            g.onLost(lost::complete);
            assertFalse(admin.release(name, g.fencingToken() + 1));
            assertTrue(admin.release(name, g.fencingToken()));
            assertEquals(LossReason.KEY_DELETED, lost.get(5, TimeUnit.SECONDS));
            assertFalse(admin.release(name, g.fencingToken()));
            LockGuard next = admin.tryAcquire(name).orElseThrow();
            assertTrue(next.fencingToken() > g.fencingToken());
            next.unlock();
        }
    }
}
