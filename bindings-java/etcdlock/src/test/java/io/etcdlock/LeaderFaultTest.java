package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Holds and waits ride through an etcd leader kill and a 3 s leader hang in a 3-member
 * cluster at TTL 5 s, and a 5 s hang at TTL 10 s (default options otherwise): no loss, the queued waiter still waits,
 * lock/unlock cycles resume soon after the fault. The core's own test measures the resume
 * against etcd's election; this shows the Java binding keeps it.
 */
class LeaderFaultTest {

    @ParameterizedTest
    @CsvSource({"kill,5", "hang3s,5", "hang5s,10"})
    void aHoldAndAWaiterSurviveALeaderFault(String fault, int ttl) throws Exception {
        try (EtcdExtension.Etcd etcd = EtcdExtension.Etcd.start("--members", "3");
             EtcdLockClient holder = EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(ttl)).build();
             EtcdLockClient waiter = EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(ttl)).build();
             EtcdLockClient cycler = EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(ttl)).build()) {
            LockGuard g = holder.acquire("held", Duration.ofSeconds(5));
            CompletableFuture<LockGuard> w = waiter.acquireAsync("held");
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (holder.status("held").waiters().size() != 1) {
                assertTrue(System.nanoTime() < until, "the waiter never queued");
                Thread.sleep(20);
            }
            List<Long> done = new CopyOnWriteArrayList<>();
            AtomicBoolean stop = new AtomicBoolean();
            Thread cy = new Thread(() -> {
                while (!stop.get()) {
                    try (LockGuard l = cycler.acquire("cycle", Duration.ofSeconds(10))) {
                        l.isHeld();
                    } catch (EtcdLockException e) {
                        continue; // etcd between leaders: try again
                    }
                    done.add(System.nanoTime());
                }
            });
            cy.start();
            while (done.isEmpty()) {
                Thread.sleep(5);
            }
            Matcher m = Pattern.compile("\"leader\"\\s*:\\s*(\\d+)").matcher(etcd.command("leader"));
            assertTrue(m.find(), "a leader");
            int leader = Integer.parseInt(m.group(1));
            long faultAt = System.nanoTime();
            etcd.command(fault.equals("kill") ? "kill " + leader : "pause " + leader + " " + (fault.charAt(4) - '0') * 1000);
            // etcd's own election, seen by asking the other members (~30 ms resolution).
            assertTrue(etcd.command("elected " + leader).contains("\"leader\""));
            long election = System.nanoTime() - faultAt;
            long after = faultAt + TimeUnit.MILLISECONDS.toNanos(50);
            while (done.stream().noneMatch(t -> t > after)) {
                assertTrue(System.nanoTime() - faultAt < TimeUnit.SECONDS.toNanos(5), "cycles did not resume within 5 s");
                Thread.sleep(5);
            }
            long resumed = done.stream().filter(t -> t > after).min(Long::compare).orElseThrow() - faultAt;
            // The target is 600 ms after the new leader; 1 s here for a loaded CI machine.
            assertTrue(resumed - election <= TimeUnit.SECONDS.toNanos(1),
                    "resumed " + resumed / 1_000_000 + " ms after the fault, " + (resumed - election) / 1_000_000 + " ms after the election");
            // Past where a session that stopped renewing at the fault would have ended locally.
            long rest = faultAt + TimeUnit.SECONDS.toNanos(ttl + 1) - System.nanoTime();
            if (rest > 0) {
                Thread.sleep(TimeUnit.NANOSECONDS.toMillis(rest));
            }
            assertTrue(g.isHeld(), "the hold was lost: " + g.lossReason());
            assertFalse(w.isDone(), "the queued waiter ended");
            g.put("still-mine", "yes");
            g.close();
            try (LockGuard next = w.get(5, TimeUnit.SECONDS)) {
                assertTrue(next.fencingToken() > g.fencingToken());
            }
            stop.set(true);
            cy.join(15_000);
            System.out.println(fault + ": etcd elected a new leader " + election / 1_000_000 + " ms after the fault; lock/unlock resumed "
                    + (resumed - election) / 1_000_000 + " ms after that; hold and waiter survived");
        }
    }
}
