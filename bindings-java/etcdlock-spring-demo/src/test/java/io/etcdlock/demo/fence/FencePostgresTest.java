package io.etcdlock.demo.fence;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.etcdlock.demo.FencePostgres;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The Java PostgreSQL fencing examples against a real PostgreSQL and etcd: holder A is stopped
 * (SIGSTOP) past its 2 s lease, B takes the lock and deposits, A wakes and writes with its old
 * token. With the fence the database refuses A and A prints why; the control run without the
 * fence shows the lost update. {@code scripts/fence_scenario.py} plays it (the same driver for
 * every language; it starts and stops its own PostgreSQL and etcd); each example is a JVM of
 * its own on this test's class path.
 */
class FencePostgresTest {
    private static final Path ROOT = Path.of("").toAbsolutePath().getParent().getParent();

    /** Starts the driver on one example; its output is read on a thread of its own. */
    static CompletableFuture<String> start(String label, Class<?> example) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = List.of("python3", ROOT.resolve("scripts/fence_scenario.py").toString(), "--label", label,
                "--harness", System.getProperty("etcdlock.harness", ""), "--",
                java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"),
                example.getName());
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectInput(new File("/dev/null")).start();
        return CompletableFuture.supplyAsync(() -> {
            try {
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                return p.waitFor(120, TimeUnit.SECONDS) ? out + "exit " + p.exitValue() : out + "no exit in 120 s";
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
    }

    static void check(String out) {
        System.out.print(out);
        String[] lines = out.strip().split("\n");
        assertEquals("exit 0", lines[lines.length - 1], out);
        assertEquals("2 passed, 0 failed", lines[lines.length - 2], out);
    }

    /** Both examples side by side (each driver has its own etcd and PostgreSQL): the suite waits once. */
    @Test
    void jdbcAndSpringStaleWritesRefusedAndLostWithoutTheFence() throws Exception {
        CompletableFuture<String> jdbc = start("java-jdbc", FencePostgres.class);
        CompletableFuture<String> spring = start("java-spring", FenceSpring.class);
        check(jdbc.get());
        check(spring.get());
    }
}
