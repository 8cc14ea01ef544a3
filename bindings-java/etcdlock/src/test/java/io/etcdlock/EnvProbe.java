package io.etcdlock;

import java.time.Duration;

/**
 * Child JVM for the ETCDLOCK_* environment tests: builds a client with {@code builder()}
 * (explicit TTL if a second argument is given; everything else from the environment).
 */
public final class EnvProbe {
    public static void main(String[] args) {
        EtcdLockClient.Builder b = EtcdLockClient.builder();
        if (args.length > 1) {
            b.ttl(Duration.ofSeconds(Long.parseLong(args[1])));
        }
        try (EtcdLockClient c = b.build();
             LockGuard g = c.acquire(args[0])) {
            System.out.println("TTL " + c.ttlSeconds());
            System.out.println("KEY " + g.key());
            System.out.println("ENDPOINTS " + c.endpoints());
        }
    }
}
