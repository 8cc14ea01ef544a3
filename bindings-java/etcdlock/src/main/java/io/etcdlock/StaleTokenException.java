package io.etcdlock;

/**
 * A database refused a write fenced by {@link Fencing#fence}: it has seen a newer token for the
 * resource, so a later holder has written and this write must not land (roll the transaction
 * back). Unchecked, so a Spring {@code @Transactional} method rolls back on it.
 */
public class StaleTokenException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final String resource;
    private final long token;
    private final Long newest;

    /** The refusal of {@code token} for {@code resource}, where {@code newest} was seen. */
    public StaleTokenException(String resource, long token, Long newest) {
        super("token " + token + " is older than " + newest + ", the newest written for " + resource);
        this.resource = resource;
        this.token = token;
        this.newest = newest;
    }

    /** The fenced resource. */
    public String resource() {
        return resource;
    }

    /** The refused token. */
    public long token() {
        return token;
    }

    /** The newest token the database has seen for the resource (null if it has none). */
    public Long newest() {
        return newest;
    }
}
