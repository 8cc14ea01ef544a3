package io.etcdlock.demo;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.Fencing;
import io.etcdlock.LockGuard;
import io.etcdlock.LockLostException;
import io.etcdlock.StaleTokenException;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/**
 * A deposit to an account in PostgreSQL (plain JDBC), made under an etcdlock lock and fenced
 * with the hold's token: a holder that lost the lock while paused cannot overwrite a newer
 * holder's deposit.
 *
 * <p>Usage: {@code FencePostgres NAME ACCOUNT AMOUNT [--pause] [--no-fence]}. etcd from
 * ETCDLOCK_ENDPOINTS (and ETCDLOCK_TTL), PostgreSQL from the PG* variables (see {@link #jdbcUrl});
 * the tables are {@code examples/postgres/fence_schema.sql}. With --pause the holder waits for a
 * line on stdin between reading the balance and writing it (where the tests stop it past its
 * lease); --no-fence writes without the fence (the lost update the fence prevents).
 * {@code scripts/fence_scenario.py} runs it.
 */
public final class FencePostgres {
    private FencePostgres() {}

    /** jdbc:postgresql://PGHOST:PGPORT/PGDATABASE?user=PGUSER (libpq's variables; JDBC reads none). */
    public static String jdbcUrl() {
        return "jdbc:postgresql://" + System.getenv("PGHOST") + ":" + System.getenv("PGPORT") + "/"
                + System.getenv("PGDATABASE") + "?user=" + System.getenv("PGUSER");
    }

    public static void main(String[] args) throws Exception {
        String name = args[0];
        String account = args[1];
        long amount = Long.parseLong(args[2]);
        List<String> flags = Arrays.asList(args);
        String lock = "account-" + account;
        try (EtcdLockClient client = EtcdLockClient.builder().build();
             Connection db = DriverManager.getConnection(jdbcUrl())) {
            LockGuard guard = client.newLock(lock).acquire(Duration.ofSeconds(10));
            long token = guard.fencingToken();
            long balance;
            try (PreparedStatement q = db.prepareStatement("SELECT balance FROM accounts WHERE id = ?")) {
                q.setString(1, account);
                try (ResultSet rs = q.executeQuery()) {
                    rs.next();
                    balance = rs.getLong(1);
                }
            }
            System.out.println(name + ": token " + token + ", balance " + balance);
            System.out.flush();
            if (flags.contains("--pause")) { // a GC pause, a slow disk: the lease may expire here
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            }
            db.setAutoCommit(false);
            try (PreparedStatement update = db.prepareStatement("UPDATE accounts SET balance = ? WHERE id = ?")) {
                if (!flags.contains("--no-fence")) {
                    Fencing.fence(db, lock, token); // refused if a newer holder has written
                }
                update.setLong(1, balance + amount);
                update.setString(2, account);
                update.executeUpdate();
                db.commit();
                System.out.println(name + ": wrote balance " + (balance + amount));
            } catch (StaleTokenException e) {
                db.rollback();
                System.out.println(name + ": refused: " + e.getMessage());
            }
            try {
                guard.close();
            } catch (LockLostException e) {
                System.out.println(name + ": the lock was lost: " + e.reason());
            }
        }
    }
}
