package io.etcdlock;

/** etcd rejected the credentials ({@link ErrorCode#AUTH_FAILED}). */
public class AuthFailedException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public AuthFailedException(String message) {
        super(ErrorCode.AUTH_FAILED, message);
    }
}
