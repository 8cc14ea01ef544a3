package io.etcdlock;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.options.GetOption;

/** Helpers shared by the tests: clients, unique names, a raw jetcd view of etcd, child JVMs. */
public final class TestSupport {
    private static Client raw;

    private TestSupport() {}

    /** A unique lock name for one test. */
    public static String uniqueName(String stem) {
        return "test/" + stem + "/" + UUID.randomUUID().toString().substring(0, 8);
    }

    public static EtcdLockClient.Builder builder() {
        return EtcdLockClient.builder().endpoints(EtcdExtension.endpoints()).ttl(Duration.ofSeconds(5));
    }

    public static EtcdLockClient client() {
        return builder().build();
    }

    /** A plain jetcd client on the test etcd, to look at keys independently of etcdlock. */
    public static synchronized Client raw() {
        if (raw == null) {
            raw = Client.builder().endpoints(EtcdExtension.endpoints().toArray(new String[0])).build();
        }
        return raw;
    }

    static ByteSequence bs(String s) {
        return ByteSequence.from(s, StandardCharsets.UTF_8);
    }

    /** How many keys exist under {@code name + "/"} (holders and waiters). */
    public static long keysUnder(String name) throws Exception {
        return raw().getKVClient()
                .get(bs(name + "/"), GetOption.newBuilder().isPrefix(true).withCountOnly(true).build())
                .get(10, TimeUnit.SECONDS).getCount();
    }

    /** The value of a raw key, or null. */
    public static String rawGet(String key) throws Exception {
        var kvs = raw().getKVClient().get(bs(key)).get(10, TimeUnit.SECONDS).getKvs();
        return kvs.isEmpty() ? null : kvs.get(0).getValue().toString(StandardCharsets.UTF_8);
    }

    /** Wait for a condition that an etcd event will make true (bounded, fails on timeout). */
    public static void await(String what, Duration max, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + max.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + max + " waiting for: " + what);
            }
            Thread.sleep(10);
        }
    }

    /** Wait until exactly {@code n} keys exist under the lock name. */
    public static void awaitKeys(String name, long n, Duration max) throws InterruptedException {
        await(n + " key(s) under " + name, max, () -> {
            try {
                return keysUnder(name) == n;
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
    }

    /** Start a child JVM running {@code main} of a test class with these arguments. */
    public static Process childJvm(Class<?> main, String... args) throws Exception {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> cmd = new ArrayList<>(List.of(java, "-cp", cp));
        String lib = System.getProperty(NativeLibrary.PATH_PROPERTY);
        if (lib != null) {
            cmd.add("-D" + NativeLibrary.PATH_PROPERTY + "=" + lib);
        }
        cmd.add(main.getName());
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }
}
