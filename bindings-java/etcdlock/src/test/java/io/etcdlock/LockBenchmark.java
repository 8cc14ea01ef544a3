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
 * Before those, the handoff: 8 threads with a client each on one lock ({@link #handoff}).
 *
 * <p>System properties: {@code etcdlock.bench.jetcd=false} leaves jetcd's cases out (no jetcd
 * client, so none of its gRPC/Netty threads, in the JVM); {@code etcdlock.bench.handoff=N}
 * acquisitions of the handoff case (default: the rounds; 0 skips it);
 * {@code etcdlock.bench.contendedSeconds=S} per contended case (default 5; 0 skips them).
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
        boolean withJetcd = Boolean.parseBoolean(System.getProperty("etcdlock.bench.jetcd", "true"));
        try (EtcdExtension.Etcd etcd = EtcdExtension.Etcd.startOrExternal();
             EtcdLockClient client = EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(30)).build();
             Client jetcd = withJetcd ? Client.builder().endpoints(etcd.endpoints.toArray(new String[0])).build() : null) {
            long lease = rawGrantLease(client, 30);
            long jlease = withJetcd ? jetcd.getLeaseClient().grant(30).get().getID() : 0;
            if (withJetcd) {
                // Keep the jetcd lease alive for the run.
                jetcd.getLeaseClient().keepAlive(jlease, new io.grpc.stub.StreamObserver<>() {
                    public void onNext(io.etcd.jetcd.lease.LeaseKeepAliveResponse r) {}
                    public void onError(Throwable t) {}
                    public void onCompleted() {}
                });
            }
            EtcdLock lock = client.newLock("bench/lock-interface");
            ByteSequence jkey = bs("bench/jetcd-raw/k");

            System.out.printf("etcdlock Java benchmark: %d rounds after %d warm-up; each round runs every case once "
                    + "(interleaved, so load drift hits all cases alike)%s; etcd %s%n", n, warm,
                    withJetcd ? "" : "; jetcd's cases left out (-Detcdlock.bench.jetcd=false: no jetcd client in this JVM)",
                    etcd.endpoints);
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
            int[] run = withJetcd ? new int[] {0, 1, 2, 3, 4, 5} : new int[] {0, 2, 3, 4};
            String[] runNames = new String[run.length];
            Op1[] runOps = new Op1[run.length];
            for (int k = 0; k < run.length; k++) {
                runNames[k] = names[run[k]];
                runOps[k] = ops[run[k]];
            }
            double[][] rr = measureAll(runNames, runOps, n, warm);
            double[][] r = new double[names.length][];
            for (int k = 0; k < run.length; k++) {
                r[run[k]] = rr[k];
            }
            double[] raw = r[0], jraw = r[1], core = r[2], guard = r[3], lk = r[4], jl = r[5];
            System.out.println();
            System.out.printf("p50 ratio etcdlock guard / raw floor (native)  = %.2fx%n", guard[0] / raw[0]);
            System.out.printf("p50 ratio etcdlock Lock  / raw floor (native)  = %.2fx%n", lk[0] / raw[0]);
            System.out.printf("p50 ratio core (Rust)    / raw floor (native)  = %.2fx%n", core[0] / raw[0]);
            System.out.printf("p50 ratio etcdlock Lock  / core (Rust)         = %.2fx  (what the Java layer adds)%n", lk[0] / core[0]);
            if (withJetcd) {
                System.out.printf("p50 ratio etcdlock guard / raw floor (jetcd)   = %.2fx%n", guard[0] / jraw[0]);
                System.out.printf("p50 ratio jetcd Lock     / raw floor (native)  = %.2fx%n", jl[0] / raw[0]);
                System.out.printf("p50 ratio jetcd Lock     / etcdlock guard      = %.2fx%n", jl[0] / guard[0]);
                jetcd.getLeaseClient().revoke(jlease).get(5, TimeUnit.SECONDS);
            }

            int acquisitions = Integer.getInteger("etcdlock.bench.handoff", n);
            if (acquisitions > 0) {
                handoff(etcd.endpoints, acquisitions);
            }
            if (Integer.getInteger("etcdlock.bench.contendedSeconds", 5) > 0) {
                contendedCases(client, raw[0]);
            }
        }
        System.exit(0);
    }

    /** Contenders in the handoff case: 8, as core_bench's rust_core_handoff. */
    static final int CONTENDERS = 8;

    /**
     * The handoff: {@link #CONTENDERS} platform threads, each with its own client (its own
     * connection and session) and {@link EtcdLock}, looping {@code lock()} -> {@code unlock()}
     * on one name for {@code acquisitions} acquisitions after a tenth as many as warm-up.
     * Handoff = when the next holder's {@code lock()} returned minus when the previous holder
     * called {@code unlock()}, the definition of core_bench's rust_core_handoff (ffi-c/bench/rust)
     * and every binding's bench (bench/languages.sh).
     */
    static void handoff(java.util.List<String> endpoints, int acquisitions) throws Exception {
        int warmUp = acquisitions / 10;
        int total = warmUp + acquisitions;
        String name = "bench/handoff-" + ProcessHandle.current().pid();
        EtcdLockClient[] clients = new EtcdLockClient[CONTENDERS];
        for (int i = 0; i < CONTENDERS; i++) {
            clients[i] = EtcdLockClient.builder().endpoints(endpoints).ttl(Duration.ofSeconds(30)).build();
        }
        Object mu = new Object();
        long[] handoffs = new long[acquisitions];
        long[] waits = new long[acquisitions];
        // Touched by the holder of the lock only, under mu: taken, nh, nw, last unlock, first, last.
        long[] st = {0, 0, 0, Long.MIN_VALUE, 0, 0};
        Thread[] threads = new Thread[CONTENDERS];
        Throwable[] failed = new Throwable[1];
        for (int i = 0; i < CONTENDERS; i++) {
            EtcdLock lk = clients[i].newLock(name);
            threads[i] = new Thread(() -> {
                try {
                    for (;;) {
                        long t0 = System.nanoTime();
                        lk.lock();
                        long at = System.nanoTime();
                        boolean done;
                        synchronized (mu) {
                            long k = st[0]++;
                            if (k >= warmUp && k < total) {
                                if (st[3] != Long.MIN_VALUE) {
                                    handoffs[(int) st[1]++] = at - st[3];
                                }
                                waits[(int) st[2]++] = at - t0;
                                if (st[2] == 1) {
                                    st[4] = at;
                                }
                                st[5] = at;
                            }
                            done = k + 1 >= total;
                            st[3] = System.nanoTime();
                        }
                        lk.unlock();
                        if (done) {
                            return;
                        }
                    }
                } catch (Throwable t) {
                    failed[0] = t;
                }
            }, "handoff-" + i);
            threads[i].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        for (EtcdLockClient c : clients) {
            c.close();
        }
        if (failed[0] != null) {
            throw new AssertionError("handoff contender failed", failed[0]);
        }
        int nh = (int) st[1], nw = (int) st[2];
        long[] h = Arrays.copyOf(handoffs, nh);
        long[] w = Arrays.copyOf(waits, nw);
        Arrays.sort(h);
        Arrays.sort(w);
        double perSec = st[5] > st[4] ? (nw - 1) / ((st[5] - st[4]) / 1e9) : 0;
        System.out.printf("%n%d threads, a client each, on one lock, %d acquisitions: handoff = unlock() called -> next lock() returned%n",
                CONTENDERS, acquisitions);
        System.out.printf("  %-55s p50 %8.1f us   p99 %8.1f us   wait p50 %8.1f us   %.0f acquisitions/s%n",
                "handoff: Lock.lock()+unlock(), 8 clients", h[nh / 2] / 1e3, h[Math.min(nh - 1, (int) (nh * 0.99))] / 1e3,
                w[nw / 2] / 1e3, perSec);
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
