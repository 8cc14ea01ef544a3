package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Issue 62's first acceptance line: a deadlock between this Java client and a Python client
 * (Java holds x and waits for y; Python holds y and waits for x) is found by {@code etcdlock
 * deadlocks} and by {@link EtcdLockClient#deadlocks}; with {@code detectDeadlock} the wait that
 * closes the cycle fails with {@link DeadlockException} (the delay after that wait began is
 * printed), and the other client then acquires.
 *
 * <p>The Python client is {@code src/test/python/deadlock_worker.py} run by the interpreter named by
 * {@code -Detcdlock.python}: by default a venv under the cargo target dir into which the Maven
 * build (execution build-python-venv) installs the Python binding, as bindings-python/test.sh
 * builds it. The CLI is {@code -Detcdlock.cli}.
 */
@ExtendWith(EtcdExtension.class)
class CrossLanguageDeadlockTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration LONG = Duration.ofSeconds(30);

    /** The Python worker: commands in, JSON events out (read by a thread into a queue). */
    static final class PythonClient implements AutoCloseable {
        final Process p;
        final Writer in;
        final BlockingQueue<JsonNode> events = new LinkedBlockingQueue<>();

        PythonClient(String python) throws Exception {
            File worker = new File(System.getProperty("user.dir"), "src/test/python/deadlock_worker.py");
            p = new ProcessBuilder(python, worker.getPath(), String.join(",", EtcdExtension.endpoints()))
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            in = new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8);
            Thread reader = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null;) {
                        events.add(JSON.readTree(line));
                    }
                } catch (Exception e) {
                    events.add(JSON.createObjectNode().put("ev", "reader-failed").put("error", e.toString()));
                }
            }, "python-worker-events");
            reader.setDaemon(true);
            reader.start();
            expect("ready", null);
        }

        void send(String cmd) throws Exception {
            in.write(cmd + "\n");
            in.flush();
        }

        /** The next event, which must be {@code ev} for {@code name} (null: any name). */
        JsonNode expect(String ev, String name) throws Exception {
            JsonNode e = events.poll(30, TimeUnit.SECONDS);
            assertNotNull(e, "the Python client said nothing within 30 s (waiting for " + ev + " " + name + ")");
            assertEquals(ev, e.path("ev").asText(), "Python client: " + e);
            if (name != null) {
                assertEquals(name, e.path("name").asText(), "Python client: " + e);
            }
            return e;
        }

        @Override
        public void close() throws Exception {
            try {
                send("quit");
            } catch (Exception e) {
                // gone already
            }
            if (!p.waitFor(15, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
        }
    }

    /** {@code etcdlock deadlocks PREFIX --json}: its exit status, record and stderr. */
    static Object[] cliDeadlocks(String prefix) throws Exception {
        String cli = System.getProperty("etcdlock.cli", "");
        assertTrue(new File(cli).canExecute(), "no CLI at -Detcdlock.cli=" + cli);
        Process p = new ProcessBuilder(cli, "--endpoints", String.join(",", EtcdExtension.endpoints()), "deadlocks",
                prefix, "--json").start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        return new Object[] {p.exitValue(), out.isBlank() ? null : JSON.readTree(out), err};
    }

    static Set<String> languages(Deadlocks.Cycle c) {
        Set<String> s = new TreeSet<>();
        for (Deadlocks.WaitEdge e : c.edges()) {
            s.add(e.waiter().language().orElse("?") + " waits for " + e.name() + " held by "
                    + e.holder().language().orElse("?"));
        }
        return s;
    }

    @Test
    void aJavaAndAPythonClientDeadlock() throws Exception {
        String python = System.getProperty("etcdlock.python", "");
        assertFalse(python.isEmpty(), "-Detcdlock.python names no interpreter with the etcdlock package");
        String base = uniqueName("xlang");
        String x = base + "/x";
        String y = base + "/y";
        try (EtcdLockClient java = client(); PythonClient py = new PythonClient(python)) {
            // 1. The deadlock, found by the CLI and by the API.
            LockGuard hx = java.acquire(x);
            py.send("lock " + y + " 30");
            long pyLease = py.expect("acquired", y).get("lease").asLong();
            CompletableFuture<LockGuard> javaWaitsY = java.acquireAsync(y, LONG);
            py.send("lock " + x + " 30");
            awaitKeys(y, 2, Duration.ofSeconds(10));
            awaitKeys(x, 2, Duration.ofSeconds(10));
            Deadlocks d = java.deadlocks(base + "/");
            assertEquals(1, d.cycles().size(), d.toString());
            Deadlocks.Cycle cycle = d.cycles().get(0);
            assertEquals(Set.of("java waits for " + y + " held by python", "python waits for " + x + " held by java"),
                    languages(cycle), cycle.toString());
            for (Deadlocks.WaitEdge e : cycle.edges()) {
                assertEquals(e.name().equals(x) ? hx.leaseId() : pyLease, e.holder().leaseId());
            }
            System.out.println("cross-language deadlock: API: " + cycle);
            Object[] cli = cliDeadlocks(base + "/");
            assertEquals(1, cli[0], "etcdlock deadlocks exits 1 on a cycle: " + cli[2]);
            JsonNode edges = ((JsonNode) cli[1]).path("cycles").path(0).path("edges");
            List<String> langs = new ArrayList<>();
            edges.forEach(e -> langs.add(e.path("waiter").path("language").asText()));
            langs.sort(null);
            assertEquals(List.of("java", "python"), langs, String.valueOf(cli[1]));
            System.out.println("cross-language deadlock: etcdlock deadlocks --json: exit 1, " + cli[1]);
            // Java gives up its hold: Python is served, and then Java.
            hx.unlock();
            py.expect("acquired", x);
            assertEquals(List.of(), java.deadlocks(base + "/").cycles());
            py.send("unlock " + x);
            py.expect("unlocked", x);
            py.send("unlock " + y);
            py.expect("unlocked", y);
            javaWaitsY.get(10, TimeUnit.SECONDS).unlock();

            // 2. The opt-in: Java's wait closes the cycle and fails with Deadlock; Python then acquires.
            String x2 = base + "/x2";
            String y2 = base + "/y2";
            LockGuard hx2 = java.acquire(x2);
            py.send("lock " + y2 + " 30");
            py.expect("acquired", y2);
            py.send("lock " + x2 + " 30");
            awaitKeys(x2, 2, Duration.ofSeconds(10));
            AcquireOptions detect = AcquireOptions.builder().detectDeadlock().build();
            long t0 = System.nanoTime();
            DeadlockException e = assertThrows(DeadlockException.class, () -> java.newLock(y2, detect).acquire(LONG));
            double failMs = (System.nanoTime() - t0) / 1e6;
            assertTrue(e.getMessage().contains("(python, lease") && e.getMessage().contains("(java, lease"), e.getMessage());
            assertTrue(failMs < 2000, "Deadlock " + failMs + " ms after the wait began");
            assertEquals(1, keysUnder(y2), "the failed wait's key is gone");
            long t1 = System.nanoTime();
            hx2.unlock();
            py.expect("acquired", x2);
            double servedMs = (System.nanoTime() - t1) / 1e6;
            System.out.printf("cross-language deadlock: Java's wait failed with Deadlock %.1f ms after it began "
                    + "(the second wait of the cycle); Python acquired x %.1f ms after Java released it%n", failMs, servedMs);
            System.out.println("cross-language deadlock: " + e.getMessage());
            py.send("unlock " + x2);
            py.expect("unlocked", x2);
            py.send("unlock " + y2);
            py.expect("unlocked", y2);
            await("every key gone", Duration.ofSeconds(10), () -> java.list(base + "/").isEmpty());
        }
    }
}
