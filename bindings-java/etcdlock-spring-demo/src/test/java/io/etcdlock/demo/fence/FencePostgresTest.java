package io.etcdlock.demo.fence;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.etcdlock.demo.FencePostgres;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
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

    static String run(String label, Class<?> example) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = List.of("python3", ROOT.resolve("scripts/fence_scenario.py").toString(), "--label", label,
                "--harness", System.getProperty("etcdlock.harness", ""), "--",
                java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"),
                example.getName());
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectInput(new File("/dev/null")).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor(120, TimeUnit.SECONDS);
        System.out.print(out);
        assertEquals(0, p.exitValue(), out);
        String[] lines = out.strip().split("\n");
        assertEquals("2 passed, 0 failed", lines[lines.length - 1], out);
        return out;
    }

    @Test
    void jdbcStaleWriteRefusedAndLostWithoutTheFence() throws Exception {
        run("java-jdbc", FencePostgres.class);
    }

    @Test
    void springTransactionalStaleWriteRefusedAndLostWithoutTheFence() throws Exception {
        run("java-spring", FenceSpring.class);
    }
}
