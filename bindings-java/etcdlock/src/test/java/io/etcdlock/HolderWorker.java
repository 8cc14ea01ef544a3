package io.etcdlock;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Arrays;

/**
 * Child JVM for the loss test: takes the lock with a short TTL, prints {@code HELD <token>},
 * reports loss events as {@code LOST <reason>}, and on each {@code PUT <key>} line on stdin
 * tries a guarded put and prints {@code PUT-OK} or {@code PUT-REJECTED <code> <reason>}.
 * Args: endpoints(comma) lockName ttlSeconds [release-on-exit].
 */
public final class HolderWorker {
    public static void main(String[] args) throws Exception {
        boolean releaseOnExit = args.length > 3 && args[3].equals("release-on-exit");
        try (EtcdLockClient c = EtcdLockClient.builder().endpoints(Arrays.asList(args[0].split(",")))
                .ttl(Duration.ofSeconds(Long.parseLong(args[2]))).releaseOnExit(releaseOnExit).build()) {
            LockGuard g = c.acquire(args[1], Duration.ofSeconds(10));
            g.onLost(r -> say("LOST " + r));
            say("HELD " + g.fencingToken());
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.startsWith("PUT ")) {
                    try {
                        g.put(line.substring(4), "stale-write");
                        say("PUT-OK");
                    } catch (LockLostException e) {
                        say("PUT-REJECTED " + e.code() + " " + e.reason());
                    } catch (EtcdLockException e) {
                        say("PUT-REJECTED " + e.code() + " -");
                    }
                }
            }
            try {
                g.close();
            } catch (LockLostException expected) {
                // lost earlier, as the test arranged
            }
        }
    }

    static synchronized void say(String s) {
        System.out.println(s);
        System.out.flush();
    }
}
