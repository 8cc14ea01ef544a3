package io.etcdlock;

/**
 * Base class of every exception etcdlock throws. Unchecked; one subclass per
 * {@link ErrorCode}, so callers can catch exactly what they handle:
 *
 * <pre>{@code
 * try (LockGuard g = client.newLock("orders").acquire(Duration.ofSeconds(2))) {
 *     ...
 * } catch (LockTimeoutException e) {
 *     // somebody else is busy with the orders
 * }
 * }</pre>
 */
public class EtcdLockException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final ErrorCode code;
    private boolean retryable;

    /** An exception with this code and message. */
    public EtcdLockException(ErrorCode code, String message) {
        super(message);
        this.code = code;
    }

    /** The stable error code. */
    public ErrorCode code() {
        return code;
    }

    /**
     * Whether the same call may succeed if tried again, as the core decides it for every
     * language ({@code TIMEOUT}, {@code WOULD_BLOCK} and {@code UNAVAILABLE} are; bad
     * arguments, a lost hold or a closed client are not).
     */
    public boolean isRetryable() {
        return retryable;
    }

    /** The subclass instance for a code, with the core's retry verdict (used by the native layer). */
    static EtcdLockException of(ErrorCode code, LossReason reason, String message, boolean retryable) {
        EtcdLockException e = of(code, reason, message);
        e.retryable = retryable;
        return e;
    }

    /** The subclass instance for a code (used by the native layer). */
    public static EtcdLockException of(ErrorCode code, LossReason reason, String message) {
        switch (code) {
            case INVALID_ARGUMENT: return new InvalidArgumentException(message);
            case TIMEOUT: return new LockTimeoutException(message);
            case WOULD_BLOCK: return new WouldBlockException(message);
            case LOCK_LOST: return new LockLostException(reason, message);
            case NOT_HELD: return new NotHeldException(message);
            case CANCELLED: return new CancelledException(message);
            case UNAVAILABLE: return new UnavailableException(message);
            case AUTH_FAILED: return new AuthFailedException(message);
            case PERMISSION_DENIED: return new PermissionDeniedException(message);
            case CLOSED: return new ClosedException(message);
            case DEADLOCK: return new DeadlockException(message);
            default: return new InternalException(message);
        }
    }
}
