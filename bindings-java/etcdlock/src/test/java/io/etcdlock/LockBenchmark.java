package io.etcdlock;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.DeleteOption;
import io.etcd.jetcd.options.PutOption;

/**
 * Uncontended lock+unlock latency of etcdlock from Java, against floors measured in the
 * same run on the same etcd: the raw etcd round trip (Txn put-with-lease + Delete) through
 * the native etcd client, the same through jetcd, and jetcd's own Lock client.
 * Then the contended case: 8 platform threads, 8 and 1,000 virtual threads (JDK 21+) taking
 * turns on one {@link EtcdLock}, in acquisitions/s against the serial raw floor rate.
 *
 * <p>Run: {@code bindings-java/bench.sh [iterations]}.
 */
public final class LockBenchmark {
    interface Op1 {
        void run(int i) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        int warm = Math.max(50, n / 5);
        if (args.length > 1 && args[1].equals("contended")) {
            contendedOnly(n, warm);
            return;
        }
        try (EtcdExtension.Etcd etcd = EtcdExtension.Etcd.startOrExternal();
             EtcdLockClient client = EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(30)).build();
             Client jetcd = Client.builder().endpoints(etcd.endpoints.toArray(new String[0])).build()) {
            long lease = rawGrantLease(client, 30);
            long jlease = jetcd.getLeaseClient().grant(30).get().getID();
            // Keep the jetcd lease alive for the run.
            jetcd.getLeaseClient().keepAlive(jlease, new io.grpc.stub.StreamObserver<>() {
                public void onNext(io.etcd.jetcd.lease.LeaseKeepAliveResponse r) {}
                public void onError(Throwable t) {}
                public void onCompleted() {}
            });
            EtcdLock lock = client.newLock("bench/lock-interface");
            ByteSequence jkey = bs("bench/jetcd-raw/k");

            System.out.printf("etcdlock Java benchmark: %d rounds after %d warm-up; each round runs every case once "
                    + "(interleaved, so load drift hits all cases alike); etcd %s%n", n, warm, etcd.endpoints);
            String[] names = {
                "raw floor: native etcd-client Txn(put+lease)+Delete",
                "raw floor: jetcd Txn(put+lease)+Delete",
                "core lock+unlock inside one JNI call (no Java layer)",
                "etcdlock acquire()+close() (LockGuard)",
                "etcdlock Lock.lock()+unlock()",
                "jetcd Lock client lock()+unlock()",
            };
            Op1[] ops = {
                i -> rawRoundTrip(client, "bench/raw/k", lease),
                i -> {
                    jetcd.getKVClient().txn()
                            .If(new Cmp(jkey, Cmp.Op.EQUAL, CmpTarget.createRevision(0)))
                            .Then(Op.put(jkey, bs(""), PutOption.newBuilder().withLeaseId(jlease).build()))
                            .commit().get(5, TimeUnit.SECONDS);
                    jetcd.getKVClient().delete(jkey).get(5, TimeUnit.SECONDS);
                },
                i -> coreLockUnlock(client, "bench/core"),
                i -> {
                    try (LockGuard g = client.acquire("bench/guard")) {
                        if (g.fencingToken() <= 0) {
                            throw new AssertionError();
                        }
                    }
                },
                i -> {
                    lock.lock();
                    lock.unlock();
                },
                i -> {
                    ByteSequence key = jetcd.getLockClient().lock(bs("bench/jetcd-lock"), jlease).get(5, TimeUnit.SECONDS).getKey();
                    jetcd.getLockClient().unlock(key).get(5, TimeUnit.SECONDS);
                },
            };
            double[][] r = measureAll(names, ops, n, warm);
            double[] raw = r[0], jraw = r[1], core = r[2], guard = r[3], lk = r[4], jl = r[5];
            System.out.println();
            System.out.printf("p50 ratio etcdlock guard / raw floor (native)  = %.2fx%n", guard[0] / raw[0]);
            System.out.printf("p50 ratio etcdlock Lock  / raw floor (native)  = %.2fx%n", lk[0] / raw[0]);
            System.out.printf("p50 ratio core (Rust)    / raw floor (native)  = %.2fx%n", core[0] / raw[0]);
            System.out.printf("p50 ratio etcdlock Lock  / core (Rust)         = %.2fx  (what the Java layer adds)%n", lk[0] / core[0]);
            System.out.printf("p50 ratio etcdlock guard / raw floor (jetcd)   = %.2fx%n", guard[0] / jraw[0]);
            System.out.printf("p50 ratio jetcd Lock     / raw floor (native)  = %.2fx%n", jl[0] / raw[0]);
            System.out.printf("p50 ratio jetcd Lock     / etcdlock guard      = %.2fx%n", jl[0] / guard[0]);
            jetcd.getLeaseClient().revoke(jlease).get(5, TimeUnit.SECONDS);

            contendedCases(client, raw[0]);
        }
        System.exit(0);
    }

    /**
     * Only the raw native floor and the contended cases: for a JDK 21+ run (virtual threads),
     * where jetcd's gRPC stack does not work (bench.sh runs the full benchmark on the default
     * JDK and this on the newest one).
     */
    static void contendedOnly(int n, int warm) throws Exception {
        try (EtcdExtension.Etcd etcd = EtcdExtension.Etcd.startOrExternal();
             EtcdLockClient client = EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(30)).build()) {
            long lease = rawGrantLease(client, 30);
            System.out.printf("etcdlock Java contended benchmark on JDK %s: raw floor over %d rounds; etcd %s%n",
                    System.getProperty("java.version"), n, etcd.endpoints);
            double[][] r = measureAll(new String[] {"raw floor: native etcd-client Txn(put+lease)+Delete"},
                    new Op1[] {i -> rawRoundTrip(client, "bench/raw/k", lease)}, n, warm);
            contendedCases(client, r[0][0]);
        }
        System.exit(0);
    }

    /** Threads taking turns on one Lock, platform and virtual (JDK 21+), against the floor rate. */
    static void contendedCases(EtcdLockClient client, double rawP50Micros) throws Exception {
        double floorRate = 1e6 / rawP50Micros;
        int secs = Integer.getInteger("etcdlock.bench.contendedSeconds", 5);
        System.out.printf("%ncontended: threads on one Lock doing lock()+unlock() for %d s; floor = one caller's serial raw"
                + " Txn+Delete rate, %.0f/s (1 / raw p50 above)%n", secs, floorRate);
        ThreadFactory virtual = virtualThreadFactory();
        Object[][] cases = {
            {"8 platform threads", 8, Executors.defaultThreadFactory()},
            {"8 virtual threads", 8, virtual},
            {"1000 virtual threads", 1000, virtual},
        };
        for (Object[] c : cases) {
            if (c[2] == null) {
                System.out.printf("  %-22s not run: virtual threads need JDK 21+ (this is %s)%n", c[0], System.getProperty("java.version"));
                continue;
            }
            double rate = contended(client, "bench/contended/" + c[1] + c[0].hashCode(), (Integer) c[1], (ThreadFactory) c[2], secs);
            System.out.printf("  %-22s %8.0f acquisitions/s = %.2fx the floor rate%n", c[0], rate, rate / floorRate);
        }
    }

    /** Virtual threads through reflection (this module compiles for Java 11); null before JDK 21. */
    static ThreadFactory virtualThreadFactory() {
        try {
            Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
            return (ThreadFactory) Class.forName("java.lang.Thread$Builder").getMethod("factory").invoke(builder);
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    /** {@code threads} threads made by {@code tf} doing lock()+unlock() on one lock for {@code secs} s: acquisitions/s. */
    static double contended(EtcdLockClient client, String name, int threads, ThreadFactory tf, int secs) throws Exception {
        EtcdLock lock = client.newLock(name);
        AtomicLong count = new AtomicLong();
        CountDownLatch done = new CountDownLatch(threads);
        long start = System.nanoTime();
        long end = start + TimeUnit.SECONDS.toNanos(secs);
        for (int i = 0; i < threads; i++) {
            tf.newThread(() -> {
                try {
                    while (System.nanoTime() < end) {
                        lock.lock();
                        try {
                            count.incrementAndGet();
                        } finally {
                            lock.unlock();
                        }
                    }
                } finally {
                    done.countDown();
                }
            }).start();
        }
        if (!done.await(secs + 60L, TimeUnit.SECONDS)) {
            throw new AssertionError("contended run stalled");
        }
        return count.get() / ((System.nanoTime() - start) / 1e9);
    }

    static ByteSequence bs(String s) {
        return ByteSequence.from(s, StandardCharsets.UTF_8);
    }

    static double[][] measureAll(String[] names, Op1[] ops, int n, int warm) throws Exception {
        for (int i = 0; i < warm; i++) {
            for (Op1 op : ops) {
                op.run(i);
            }
        }
        long[][] t = new long[ops.length][n];
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < ops.length; k++) {
                long t0 = System.nanoTime();
                ops[k].run(i);
                t[k][i] = System.nanoTime() - t0;
            }
        }
        double[][] out = new double[ops.length][];
        for (int k = 0; k < ops.length; k++) {
            Arrays.sort(t[k]);
            double p50 = t[k][n / 2] / 1e3;
            double p99 = t[k][Math.min(n - 1, (int) (n * 0.99))] / 1e3;
            System.out.printf("  %-55s p50 %8.1f us   p99 %8.1f us%n", names[k], p50, p99);
            out[k] = new double[] {p50, p99};
        }
        return out;
    }

    // The native benchmark entry points (a native library built with the `bench` feature:
    // bench.sh builds one), called with the client's native handle pinned.

    /** A lease of {@code ttl} seconds through the raw etcd client. */
    static long rawGrantLease(EtcdLockClient client, long ttl) {
        long c = client.handle().pin();
        try {
            return NativeBridge.rawGrant(c, ttl);
        } finally {
            client.handle().unpin();
        }
    }

    /** The floor: one raw Txn (put with {@code lease}) + Delete of {@code key}, no lock protocol. */
    static void rawRoundTrip(EtcdLockClient client, String key, long lease) {
        long c = client.handle().pin();
        try {
            NativeBridge.rawRoundTrip(c, key, lease);
        } finally {
            client.handle().unpin();
        }
    }

    /** One uncontended lock + unlock done entirely in the native core; returns the token. */
    static long coreLockUnlock(EtcdLockClient client, String name) {
        long c = client.handle().pin();
        try {
            return NativeBridge.coreLockUnlock(c, name);
        } finally {
            client.handle().unpin();
        }
    }
}
