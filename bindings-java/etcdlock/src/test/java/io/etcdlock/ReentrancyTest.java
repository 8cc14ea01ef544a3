package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
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
