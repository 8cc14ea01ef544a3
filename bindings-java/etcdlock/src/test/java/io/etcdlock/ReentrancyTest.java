package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@link EtcdLock} as a {@link java.util.concurrent.locks.Lock}: hold counts and ownership. */
@ExtendWith(EtcdExtension.class)
class ReentrancyTest {
    static EtcdLockClient a;
    static EtcdLockClient b;

    @BeforeAll
    static void connect() {
        a = client();
        b = client();
    }

    @AfterAll
    static void close() {
        a.close();
        b.close();
    }

    @Test
    void reentrantPerThread() throws Exception {
        String name = uniqueName("reentrant");
        EtcdLock lock = a.newLock(name);
        lock.lock();
        long token = lock.guard().fencingToken();
        assertTrue(lock.tryLock());
        assertTrue(lock.tryLock(10, TimeUnit.SECONDS));
        lock.lockInterruptibly();
        assertEquals(4, lock.getHoldCount());
        assertEquals(1, keysUnder(name), "re-entering does not touch etcd");
        assertEquals(token, lock.guard().fencingToken());
        lock.unlock();
        lock.unlock();
        lock.unlock();
        assertTrue(lock.isHeldByCurrentThread());
        assertFalse(b.tryAcquire(name).isPresent(), "still held after 3 of 4 unlocks");
        lock.unlock();
        assertFalse(lock.isHeldByCurrentThread());
        assertEquals(0, lock.getHoldCount());
        assertEquals(0, keysUnder(name));
    }

    /**
     * A re-entry is core's: another handle of the thread's hold (core's {@code lock_reentrant}),
     * handed out without a request, so core counts one acquisition and one hold however often
     * the thread re-enters. Another lock object of the name is another owner, on this thread
     * too: it does not re-enter this object's hold.
     */
    @Test
    void aReentryIsAHandleOfTheSameHoldTakenWithoutARequest() throws Exception {
        String name = uniqueName("reentry-core");
        try (EtcdLockClient c = client()) {
            EtcdLock lock = c.newLock(name);
            lock.lock();
            LockGuard first = lock.guard();
            assertEquals(1, c.metrics().count(Metrics.Result.ACQUIRED));
            assertEquals(1, c.metrics().held());
            lock.lock();
            assertTrue(lock.tryLock());
            lock.lockInterruptibly();
            assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
            assertEquals(5, lock.getHoldCount());
            assertEquals(1, c.metrics().count(Metrics.Result.ACQUIRED), "no re-entry was an acquisition");
            assertEquals(1, c.metrics().held(), "one hold");
            assertEquals(1, keysUnder(name));
            assertSame(first, lock.guard(), "the guard is the acquisition's handle");

            EtcdLock other = c.newLock(name);
            assertFalse(other.tryLock(), "another lock object of the name does not re-enter this one's hold");
            assertEquals(0, other.getHoldCount());
            assertEquals(1, keysUnder(name));

            for (int i = 4; i > 0; i--) {
                lock.unlock();
                assertEquals(i, lock.getHoldCount());
                assertTrue(first.isHeld(), "the acquisition's handle is unlocked last");
            }
            assertEquals(1, keysUnder(name));
            lock.unlock();
            assertFalse(first.isHeld());
            assertEquals(0, keysUnder(name));
            assertTrue(other.tryLock(), "free again");
            assertTrue(other.guard().fencingToken() > first.fencingToken());
            other.unlock();
        }
        assertEquals(0, keysUnder(name));
    }

    /** Two threads on one lock object are two owners: the second waits for the first's hold. */
    @Test
    void twoThreadsOnOneLockObjectExcludeEachOther() throws Exception {
        String name = uniqueName("reentry-threads");
        EtcdLock lock = a.newLock(name);
        lock.lock();
        lock.lock();
        long mine = lock.guard().fencingToken();
        AtomicReference<Long> theirs = new AtomicReference<>();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                lock.lock();
                try {
                    lock.lock(); // its own re-entry
                    assertEquals(2, lock.getHoldCount());
                    theirs.set(lock.guard().fencingToken());
                    lock.unlock();
                } finally {
                    lock.unlock();
                }
            } catch (Throwable e) {
                failed.set(e);
            }
        });
        t.start();
        awaitKeys(name, 2, Duration.ofSeconds(10));
        assertTrue(t.isAlive(), "the second thread waits");
        assertNull(theirs.get());
        assertEquals(2, lock.getHoldCount(), "this thread's holds are its own");
        lock.unlock();
        assertTrue(t.isAlive(), "still held after 1 of 2 unlocks");
        assertEquals(2, keysUnder(name));
        lock.unlock();
        t.join(20_000);
        assertFalse(t.isAlive());
        assertNull(failed.get());
        assertTrue(theirs.get() > mine, "the second thread took a new hold");
        assertEquals(0, keysUnder(name));
    }

    /**
     * A hold lost while re-entered, with no re-entry after the loss: each unlock ends one
     * handle, the last reports the loss (core unlocks the stale hold then), and the next
     * {@code lock()} takes a new hold with a new fencing token.
     */
    @Test
    void unlockingALostHoldEndsItAndTheNextLockTakesANewOne() throws Exception {
        String name = uniqueName("lost-unlock");
        EtcdLock lock = a.newLock(name);
        lock.lock();
        lock.lock();
        lock.lock();
        LockGuard g = lock.guard();
        raw().getKVClient().delete(bs(g.key())).get(5, TimeUnit.SECONDS);
        await("loss reported", Duration.ofSeconds(5), () -> !g.isHeld());
        assertEquals(0, lock.getHoldCount());
        lock.unlock();
        lock.unlock();
        LockLostException e = assertThrows(LockLostException.class, lock::unlock, "the last unlock reports the loss");
        assertEquals(LossReason.KEY_DELETED, e.reason());
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        lock.lock();
        assertTrue(lock.isHeldByCurrentThread());
        assertEquals(1, lock.getHoldCount());
        assertTrue(lock.guard().fencingToken() > g.fencingToken(), "a new hold");
        lock.unlock();
        assertEquals(0, keysUnder(name));
    }

    /** Closing the client loses its holds: a re-entry then ends the stale hold, as for any loss. */
    @Test
    void aHoldOfAClosedClientIsNotReentered() throws Exception {
        String name = uniqueName("closed-reentry");
        EtcdLockClient c = client();
        EtcdLock lock = c.newLock(name);
        lock.lock();
        lock.lock();
        LockGuard g = lock.guard();
        c.close();
        assertEquals(java.util.Optional.of(LossReason.CLIENT_CLOSED), g.lossReason());
        assertEquals(0, lock.getHoldCount());
        LockLostException e = assertThrows(LockLostException.class, lock::lock, "re-entering a lost hold fails");
        assertEquals(LossReason.CLIENT_CLOSED, e.reason());
        assertThrows(IllegalMonitorStateException.class, lock::unlock, "the stale hold ended");
        assertThrows(ClosedException.class, lock::lock, "a new hold needs an open client");
        assertEquals(0, keysUnder(name));
    }

    @Test
    void unlockByANonOwnerThrowsIllegalMonitorState() throws Exception {
        String name = uniqueName("imse");
        EtcdLock lock = a.newLock(name);
        assertThrows(IllegalMonitorStateException.class, lock::unlock, "never locked");
        lock.lock();
        AtomicReference<Throwable> other = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                lock.unlock();
            } catch (Throwable e) {
                other.set(e);
            }
        });
        t.start();
        t.join();
        assertTrue(other.get() instanceof IllegalMonitorStateException, String.valueOf(other.get()));
        assertTrue(lock.isHeldByCurrentThread());
        lock.unlock();
        assertThrows(IllegalMonitorStateException.class, lock::unlock, "one unlock too many");
        assertThrows(IllegalMonitorStateException.class, lock::guard);
    }

    @Test
    void anotherThreadWaitsOnTheSameLockObject() throws Exception {
        String name = uniqueName("samelock");
        EtcdLock lock = a.newLock(name);
        lock.lock();
        AtomicReference<Boolean> got = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                got.set(lock.tryLock(200, TimeUnit.MILLISECONDS));
            } catch (InterruptedException e) {
                got.set(null);
            }
        });
        t.start();
        t.join();
        assertEquals(Boolean.FALSE, got.get(), "a second thread does not re-enter another thread's hold");
        Thread t2 = new Thread(() -> {
            lock.lock();
            try {
                got.set(lock.isHeldByCurrentThread());
            } finally {
                lock.unlock();
            }
        });
        t2.start();
        awaitKeys(name, 2, Duration.ofSeconds(5));
        lock.unlock();
        t2.join(10_000);
        assertEquals(Boolean.TRUE, got.get());
        assertEquals(0, keysUnder(name));
    }

    /**
     * Only the {@link java.util.concurrent.locks.Lock} calls are reentrant per thread: a guard
     * call or an async acquisition (a future, or a Reactor Mono over it, is bound to no thread)
     * made on the thread that holds the lock object takes a hold of its own, so it does not get
     * the thread's hold: it waits behind it like any other.
     */
    @Test
    void guardAndAsyncCallsOnTheHoldingThreadTakeTheirOwnHold() throws Exception {
        String name = uniqueName("reentry-async");
        EtcdLock lock = a.newLock(name);
        lock.lock();
        assertFalse(lock.tryAcquire().isPresent(), "a guard call is not a re-entry");
        ExecutionException timedOut = assertThrows(ExecutionException.class,
                () -> lock.acquireAsync(Duration.ofMillis(200)).get(30, TimeUnit.SECONDS));
        assertInstanceOf(LockTimeoutException.class, timedOut.getCause(), "an async call is not a re-entry");
        CompletableFuture<LockGuard> waiting = lock.acquireAsync();
        awaitKeys(name, 2, Duration.ofSeconds(30)); // the thread's hold and the async waiter's key
        assertFalse(waiting.isDone());
        assertEquals(1, lock.getHoldCount());
        lock.unlock();
        LockGuard own = waiting.get(30, TimeUnit.SECONDS);
        assertEquals(0, lock.getHoldCount());
        assertEquals(1, keysUnder(name));
        own.close();
        assertEquals(0, keysUnder(name));
    }

    @Test
    void zeroTimeoutTakesAFreeLockWithoutWaiting() throws Exception {
        String name = uniqueName("zero");
        EtcdLock lock = a.newLock(name);
        assertTrue(lock.tryLock(0, TimeUnit.SECONDS));
        assertFalse(b.newLock(name).tryLock(0, TimeUnit.SECONDS));
        assertThrows(LockTimeoutException.class, () -> b.acquire(name, Duration.ZERO));
        lock.unlock();
        b.acquire(name, Duration.ZERO).close();
        assertEquals(0, keysUnder(name));
    }

    @Test
    void newConditionIsUnsupported() {
        assertThrows(UnsupportedOperationException.class, () -> a.newLock(uniqueName("cond")).newCondition());
    }

    @Test
    void interruptedBeforeLockInterruptibly() {
        EtcdLock lock = a.newLock(uniqueName("preinterrupt"));
        Thread.currentThread().interrupt();
        assertThrows(InterruptedException.class, lock::lockInterruptibly);
        assertFalse(Thread.interrupted(), "flag cleared as InterruptedException requires");
        assertFalse(lock.isHeldByCurrentThread());
    }

    /**
     * A lost hold is never re-entered (Spring's leader initiator, whose heartbeat
     * is a reentrant tryLock, kept leading after its lock was lost). The key is deleted from
     * outside; the owner's re-entries then fail and end the stale hold, and the next call
     * acquires afresh.
     */
    @Test
    void aLostHoldIsNeverReentered() throws Exception {
        String name = uniqueName("lost-reentry");
        EtcdLock lock = a.newLock(name);
        lock.lock();
        assertTrue(lock.tryLock(), "alive: re-entry counts up");
        assertEquals(2, lock.getHoldCount());
        LockGuard g = lock.guard();
        raw().getKVClient().delete(bs(g.key())).get(5, TimeUnit.SECONDS);
        await("loss reported", Duration.ofSeconds(5), () -> !g.isHeld());
        assertFalse(lock.isHeldByCurrentThread(), "false once lost");
        assertEquals(0, lock.getHoldCount());
        assertFalse(lock.tryLock(), "re-entering a lost hold fails");
        assertEquals(0, lock.getHoldCount(), "the stale hold ended");
        assertThrows(IllegalMonitorStateException.class, lock::unlock, "nothing left to unlock");
        // The next call acquires afresh, with a new fencing token.
        assertTrue(lock.tryLock(10, TimeUnit.SECONDS));
        assertTrue(lock.guard().fencingToken() > g.fencingToken());
        assertEquals(1, lock.getHoldCount());
        // lock() on a lost hold throws LockLostException, then works again.
        LockGuard g2 = lock.guard();
        raw().getKVClient().delete(bs(g2.key())).get(5, TimeUnit.SECONDS);
        await("loss reported", Duration.ofSeconds(5), () -> !g2.isHeld());
        LockLostException e = assertThrows(LockLostException.class, lock::lock);
        assertEquals(LossReason.KEY_DELETED, e.reason());
        assertEquals(0, lock.getHoldCount());
        lock.lock();
        assertTrue(lock.isHeldByCurrentThread());
        lock.unlock();
        assertEquals(0, keysUnder(name));
    }
}
