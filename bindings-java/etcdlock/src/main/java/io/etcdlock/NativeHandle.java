package io.etcdlock;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongConsumer;
import java.util.function.Supplier;

/**
 * A native pointer freed exactly once: callers {@link #pin()} it around each
 * native call, {@link #close()} drops the owner's reference, and the pointer is
 * freed when the last user unpins. A call racing with close either runs on a
 * live pointer or gets the "closed" exception; it never sees a freed one.
 */
final class NativeHandle {
    private final long ptr;
    private final LongConsumer free;
    private final Supplier<EtcdLockException> closedError;
    private final AtomicInteger users = new AtomicInteger(1);
    private final AtomicBoolean closed = new AtomicBoolean();

    NativeHandle(long ptr, LongConsumer free, Supplier<EtcdLockException> closedError) {
        this.ptr = ptr;
        this.free = free;
        this.closedError = closedError;
    }

    long pin() {
        for (;;) {
            int u = users.get();
            if (u <= 0 || closed.get()) {
                throw closedError.get();
            }
            if (users.compareAndSet(u, u + 1)) {
                return ptr;
            }
        }
    }

    void unpin() {
        if (users.decrementAndGet() == 0) {
            free.accept(ptr);
        }
    }

    /** Drop the owner's reference; true the first time. */
    boolean close() {
        if (closed.compareAndSet(false, true)) {
            unpin();
            return true;
        }
        return false;
    }

    boolean isClosed() {
        return closed.get();
    }
}
