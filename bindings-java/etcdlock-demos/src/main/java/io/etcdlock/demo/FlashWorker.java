package io.etcdlock.demo;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;

/**
 * The Java worker of the cross-language flash sale ({@code scripts/flash_sale.py}).
 *
 * <p>Contract shared by every language (see {@code cli/src/flash.rs}): FLASH_ENDPOINTS,
 * FLASH_LOCK, FLASH_STOCK_KEY, FLASH_SALES_PREFIX, FLASH_ATTEMPTS, FLASH_WORKER_ID in the
 * environment; one JSON line per purchase attempt on stdout.
 */
public final class FlashWorker {
    private FlashWorker() {}

    public static void main(String[] args) {
        String lock = System.getenv("FLASH_LOCK");
        String stockKey = System.getenv("FLASH_STOCK_KEY");
        String sales = System.getenv("FLASH_SALES_PREFIX");
        String id = System.getenv("FLASH_WORKER_ID");
        int attempts = Integer.parseInt(System.getenv("FLASH_ATTEMPTS"));
        try (EtcdLockClient client = EtcdLockClient.builder()
                .endpoints(System.getenv("FLASH_ENDPOINTS").split(","))
                .build()) {
            for (int n = 0; n < attempts; n++) {
                long t0 = System.nanoTime();
                long before;
                long token;
                boolean sold;
                double waitMs;
                try (LockGuard guard = client.newLock(lock).acquire()) {
                    waitMs = (System.nanoTime() - t0) / 1e6;
                    String v = guard.get(stockKey);
                    before = v == null ? 0 : Long.parseLong(v.trim());
                    token = guard.fencingToken();
                    sold = before > 0;
                    if (sold) {
                        guard.put(stockKey, Long.toString(before - 1));
                        guard.put(sales + String.format("%020d", token), "java");
                    }
                }
                System.out.println(String.format(java.util.Locale.ROOT,
                        "{\"lang\":\"java\",\"worker\":\"%s\",\"sold\":%b,\"token\":%d,\"wait_ms\":%.3f,"
                                + "\"stock_before\":%d,\"t_ms\":%d}",
                        id, sold, token, waitMs, before, System.currentTimeMillis()));
                System.out.flush();
            }
        }
    }
}
