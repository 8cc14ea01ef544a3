package io.etcdlock;

/**
 * The wait would close a cycle of clients waiting on each other's holds ({@link ErrorCode#DEADLOCK}):
 * raised only for an acquisition with {@link AcquireOptions.Builder#detectDeadlock()}, when it
 * queues or when the key it waits behind changes. The message names the cycle. Not retryable as
 * is: give up a hold first (this call's waiter key is already gone), then try again.
 */
public class DeadlockException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public DeadlockException(String message) {
        super(ErrorCode.DEADLOCK, message);
    }
}
