package io.etcdlock.demo;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.Fencing;
import io.etcdlock.LockGuard;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;

/**
 * The Java worker of the cross-language flash sale ({@code scripts/flash_sale.py}).
 *
 * <p>Contract shared by every language (see {@code cli/src/flash.rs}): FLASH_ENDPOINTS,
 * FLASH_LOCK, FLASH_STOCK_KEY, FLASH_SALES_PREFIX, FLASH_ATTEMPTS, FLASH_WORKER_ID in the
 * environment; one JSON line per purchase attempt on stdout. With FLASH_STORE=postgres the stock
 * is a row in PostgreSQL (PG* variables, JDBC) and each purchase one transaction fenced by the
 * hold's token ({@link Fencing}).
 */
public final class FlashWorker {
    private FlashWorker() {}

    public static void main(String[] args) throws SQLException {
        String lock = System.getenv("FLASH_LOCK");
        String stockKey = System.getenv("FLASH_STOCK_KEY");
        String sales = System.getenv("FLASH_SALES_PREFIX");
        String id = System.getenv("FLASH_WORKER_ID");
        int attempts = Integer.parseInt(System.getenv("FLASH_ATTEMPTS"));
        boolean postgres = "postgres".equals(System.getenv("FLASH_STORE"));
        try (EtcdLockClient client = EtcdLockClient.builder()
                .endpoints(System.getenv("FLASH_ENDPOINTS").split(","))
                .build();
             Connection db = postgres ? DriverManager.getConnection(FencePostgres.jdbcUrl()) : null) {
            for (int n = 0; n < attempts; n++) {
                long t0 = System.nanoTime();
                long before;
                long token;
                double waitMs;
                try (LockGuard guard = client.newLock(lock).acquire()) {
                    waitMs = (System.nanoTime() - t0) / 1e6;
                    token = guard.fencingToken();
                    if (postgres) {
                        before = purchasePostgres(db, stockKey, lock, token, id);
                    } else {
                        String v = guard.get(stockKey);
                        before = v == null ? 0 : Long.parseLong(v.trim());
                        if (before > 0) {
                            guard.put(stockKey, Long.toString(before - 1));
                            guard.put(sales + String.format("%020d", token), "java");
                        }
                    }
                }
                System.out.println(String.format(java.util.Locale.ROOT,
                        "{\"lang\":\"java\",\"worker\":\"%s\",\"sold\":%b,\"token\":%d,\"wait_ms\":%.3f,"
                                + "\"stock_before\":%d,\"t_ms\":%d}",
                        id, before > 0, token, waitMs, before, System.currentTimeMillis()));
                System.out.flush();
            }
        }
    }

    /** One transaction: read the stock, and if positive write stock-1 and a sale row, fenced by the token. */
    static long purchasePostgres(Connection db, String sku, String lock, long token, String worker) throws SQLException {
        db.setAutoCommit(false);
        try (PreparedStatement read = db.prepareStatement("SELECT stock FROM flash_stock WHERE sku = ?");
             PreparedStatement write = db.prepareStatement("UPDATE flash_stock SET stock = ? WHERE sku = ?");
             PreparedStatement sale = db.prepareStatement(
                     "INSERT INTO flash_sales (token, lang, worker) VALUES (?, 'java', ?)")) {
            read.setString(1, sku);
            long before;
            try (ResultSet rs = read.executeQuery()) {
                before = rs.next() ? rs.getLong(1) : 0;
            }
            if (before > 0) {
                Fencing.fence(db, lock, token);
                write.setLong(1, before - 1);
                write.setString(2, sku);
                write.executeUpdate();
                sale.setLong(1, token);
                sale.setString(2, worker);
                sale.executeUpdate();
            }
            db.commit();
            return before;
        } catch (SQLException | RuntimeException e) {
            db.rollback();
            throw e;
        }
    }
}
