package io.etcdlock;

/** Bad input: null or empty or oversized name, TTL out of range, bad endpoint, bad TLS file ({@link ErrorCode#INVALID_ARGUMENT}). */
public class InvalidArgumentException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public InvalidArgumentException(String message) {
        super(ErrorCode.INVALID_ARGUMENT, message);
    }
}
