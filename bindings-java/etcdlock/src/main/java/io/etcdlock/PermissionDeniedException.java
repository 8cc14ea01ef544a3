package io.etcdlock;

/** etcd RBAC denies access to the lock's key range ({@link ErrorCode#PERMISSION_DENIED}). */
public class PermissionDeniedException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public PermissionDeniedException(String message) {
        super(ErrorCode.PERMISSION_DENIED, message);
    }
}
