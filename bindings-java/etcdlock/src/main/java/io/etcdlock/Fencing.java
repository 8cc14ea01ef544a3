package io.etcdlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.regex.Pattern;

/**
 * Fencing a database write with a hold's token (PostgreSQL, plain JDBC).
 *
 * <p>A lock on etcd can end while its holder still runs (a pause past the lease, a partition),
 * so a write decided under the lock can land after the next holder's. The database stops it
 * when every write carries the hold's {@link LockGuard#fencingToken()} and the database keeps
 * the newest token it has seen per resource (the table {@link #CREATE_TABLE} defines):
 * {@link #fence} does that inside the caller's transaction, before the write, and throws
 * {@link StaleTokenException} when a newer holder has written. The fence row stays locked until
 * the transaction ends, so a stale writer waiting on it sees the newer token.
 *
 * <pre>{@code
 * try (LockGuard guard = client.newLock("account-42").acquire(Duration.ofSeconds(10))) {
 *     db.setAutoCommit(false);
 *     Fencing.fence(db, "account-42", guard.fencingToken());   // StaleTokenException: roll back
 *     update.executeUpdate();
 *     db.commit();
 * }
 * }</pre>
 *
 * <p>With Spring's {@code JdbcTemplate} inside a {@code @Transactional} method, run it on the
 * transaction's connection: {@code jdbc.execute((ConnectionCallback<Void>) c -> { Fencing.fence(c,
 * name, token); return null; })}; the unchecked exception rolls the transaction back. Only
 * {@code java.sql} is used: no driver is a dependency of etcdlock.
 */
public final class Fencing {
    /** The fence table's default name. */
    public static final String TABLE = "etcdlock_fence";
    /** Its definition: the newest token written per resource. */
    public static final String CREATE_TABLE =
            "CREATE TABLE IF NOT EXISTS " + TABLE + " (resource text PRIMARY KEY, token bigint NOT NULL)";
    private static final Pattern IDENT = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)?");

    private Fencing() {}

    /**
     * The statement {@link #fence} runs (parameters: resource, token): it moves the resource's
     * row to the token unless the row holds a newer one, so it updates 1 row when the write may
     * go on and 0 when it is stale.
     */
    public static String fenceSql(String table) {
        if (table == null || !IDENT.matcher(table).matches()) {
            throw new IllegalArgumentException("not a table name: " + table);
        }
        return "INSERT INTO " + table + " AS f (resource, token) VALUES (?, ?) "
                + "ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token";
    }

    /** {@link #fence(Connection, String, long, String)} on the default table. */
    public static void fence(Connection db, String resource, long token) throws SQLException {
        fence(db, resource, token, TABLE);
    }

    /**
     * Admit this transaction's write to {@code resource} for a holder with {@code token}, or
     * throw {@link StaleTokenException} naming the newer token the database has seen. Call it on
     * the connection of the transaction that makes the write, before the write.
     */
    public static void fence(Connection db, String resource, long token, String table) throws SQLException {
        try (PreparedStatement st = db.prepareStatement(fenceSql(table))) {
            st.setString(1, resource);
            st.setLong(2, token);
            if (st.executeUpdate() == 1) {
                return;
            }
        }
        Long newest = null;
        try (PreparedStatement st = db.prepareStatement("SELECT token FROM " + table + " WHERE resource = ?")) {
            st.setString(1, resource);
            try (ResultSet rs = st.executeQuery()) {
                if (rs.next()) {
                    newest = rs.getLong(1);
                }
            }
        }
        throw new StaleTokenException(resource, token, newest);
    }
}
