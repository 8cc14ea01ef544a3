package io.etcdlock;

import java.time.Duration;
import java.util.Arrays;

/**
 * Child JVM for the lock-delay test: takes the lock with a lock-delay, prints {@code HELD
 * <token>}, then holds it until it is killed (the test sends SIGKILL, so nothing unlocks).
 * Args: endpoints(comma) lockName ttlSeconds lockDelayMillis.
 */
public final class DelayHolder {
    public static void main(String[] args) throws Exception {
        EtcdLockClient c = EtcdLockClient.builder().endpoints(Arrays.asList(args[0].split(",")))
                .ttl(Duration.ofSeconds(Long.parseLong(args[2]))).build();
        AcquireOptions opts = AcquireOptions.builder().lockDelay(Duration.ofMillis(Long.parseLong(args[3])))
                .metadata("role", "doomed-holder").build();
        LockGuard g = c.acquire(args[1], Duration.ofSeconds(10), opts);
        System.out.println("HELD " + g.fencingToken());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
