package io.etcdlock;

/**
 * The stable error codes of etcdlock, mirrored one-to-one from the Rust core
 * ({@code etcdlock::ErrorCode}). Each has its own {@link EtcdLockException} subclass.
 */
public enum ErrorCode {
    /** Empty or oversized name, TTL out of range, bad endpoint, bad TLS file, misuse. */
    INVALID_ARGUMENT(1),
    /** The lock was not acquired within the caller's deadline. */
    TIMEOUT(2),
    /** A try-lock found the lock held by someone else. */
    WOULD_BLOCK(3),
    /** The hold ended (see {@link LockLostException#reason()}), or the waiter's session died. */
    LOCK_LOST(4),
    /** Unlock or guarded operation on a lock this handle does not hold (e.g. after unlock). */
    NOT_HELD(5),
    /** The caller cancelled the wait (interrupt, {@code CompletableFuture.cancel}). */
    CANCELLED(6),
    /** etcd unreachable after retries; the message names the endpoints. */
    UNAVAILABLE(7),
    /** Credentials rejected. */
    AUTH_FAILED(8),
    /** RBAC denies access to the key range. */
    PERMISSION_DENIED(9),
    /** The client was closed. */
    CLOSED(10),
    /** A bug in etcdlock (including a Rust panic); never a crash. */
    INTERNAL(11),
    /**
     * The wait would close a cycle of clients waiting on each other's holds (only with
     * {@link AcquireOptions.Builder#detectDeadlock()}); the message names the cycle.
     */
    DEADLOCK(12);

    private final int value;

    ErrorCode(int value) {
        this.value = value;
    }

    /** The numeric value shared with the C ABI and the other bindings. */
    public int value() {
        return value;
    }

    /** The code for a numeric value; unknown values map to {@link #INTERNAL}. */
    public static ErrorCode of(int value) {
        for (ErrorCode c : values()) {
            if (c.value == value) {
                return c;
            }
        }
        return INTERNAL;
    }
}
