package io.etcdlock;

/** Child JVM for the ETCDLOCK_* environment test: builds a client from the environment. */
public final class EnvProbe {
    public static void main(String[] args) {
        try (EtcdLockClient c = EtcdLockClient.builderFromEnv().build();
             LockGuard g = c.acquire(args[0])) {
            System.out.println("TTL " + c.ttlSeconds());
            System.out.println("KEY " + g.key());
        }
    }
}
