package io.etcdlock.spring;

import static org.junit.jupiter.api.Assertions.*;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import io.etcdlock.EtcdExtension;
import io.etcdlock.TestSupport;

/**
 * Spring Integration's {@code LockRegistryLeaderInitiator} over etcdlock, as
 * users deploy it: app instances in separate JVMs on one etcd. Its heartbeat is
 * a reentrant {@code tryLock} by the leader; a hold that was lost (frozen past
 * the TTL) must not be re-entered, or two instances lead at once.
 */
@ExtendWith(EtcdExtension.class)
class LeaderInitiatorTest {
    static final long TTL_S = 2;
    static final long HEARTBEAT_MS = 500;

    /** One instance: its process and the events it printed. */
    static final class Node implements AutoCloseable {
        final String name;
        final Process process;
        final BlockingQueue<String[]> events = new LinkedBlockingQueue<>();
        final List<String[]> seen = new ArrayList<>();

        Node(String name, String role) throws Exception {
            this.name = name;
            String eps = String.join(",", EtcdExtension.endpoints());
            process = TestSupport.childJvm(LeaderNode.class, eps, role, "" + TTL_S, "" + HEARTBEAT_MS);
            Thread reader = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(
                        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                    String l;
                    while ((l = r.readLine()) != null) {
                        String[] ev = l.split(" ");
                        if (ev.length == 2) {
                            events.add(ev);
                        }
                    }
                } catch (Exception ignored) {
                    // process gone
                }
            });
            reader.setDaemon(true);
            reader.start();
        }

        /** Wait for the next event, which must be {@code what}; returns its nanoTime. */
        long expect(String what, long withinMs) throws InterruptedException {
            String[] ev = events.poll(withinMs, TimeUnit.MILLISECONDS);
            assertNotNull(ev, name + ": no " + what + " within " + withinMs + " ms (seen " + show() + ")");
            seen.add(ev);
            assertEquals(what, ev[0], name + ": expected " + what + ", seen " + show());
            return Long.parseLong(ev[1]);
        }

        /** No event at all for {@code ms}. */
        void quiet(long ms) throws InterruptedException {
            String[] ev = events.poll(ms, TimeUnit.MILLISECONDS);
            assertNull(ev, () -> name + ": unexpected " + ev[0] + " (seen " + show() + ")");
        }

        String show() {
            StringBuilder b = new StringBuilder();
            for (String[] e : seen) {
                b.append(e[0]).append(' ');
            }
            return b.toString().trim();
        }

        void signal(String sig) throws Exception {
            Process p = new ProcessBuilder("kill", "-" + sig, Long.toString(process.pid())).inheritIO().start();
            assertEquals(0, p.waitFor());
        }

        @Override
        public void close() throws Exception {
            if (process.isAlive()) {
                signal("CONT");
                process.getOutputStream().close();
                if (!process.waitFor(20, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            }
        }
    }

    @Test
    void killedOrFrozenLeaderIsReplacedAndTheOldOneStandsDown() throws Exception {
        String role = "role-" + System.nanoTime();
        try (Node a = new Node("A", role); Node b = new Node("B", role); Node c = new Node("C", role)) {
            // The three JVMs start at once; each says STARTED before it campaigns.
            List<Node> nodes = new ArrayList<>(List.of(a, b, c));
            for (Node n : nodes) {
                n.expect("STARTED", 60_000);
            }
            // Whoever campaigned first leads: find it.
            Node leader = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (leader == null && System.nanoTime() < deadline) {
                for (Node n : nodes) {
                    String[] ev = n.events.poll(50, TimeUnit.MILLISECONDS);
                    if (ev != null) {
                        n.seen.add(ev);
                        assertEquals("GRANTED", ev[0], n.name + ": " + n.show());
                        assertNull(leader, "two instances granted: " + leader + " and " + n.name);
                        leader = n;
                    }
                }
            }
            assertNotNull(leader, "nobody was granted leadership");
            nodes.remove(leader);
            for (Node n : nodes) {
                n.quiet(2 * HEARTBEAT_MS);
            }

            // 1. kill -9 the leader: another leads within TTL + 2 s.
            leader.signal("KILL");
            long killed = System.nanoTime();
            Node next = null;
            deadline = killed + TimeUnit.SECONDS.toNanos(TTL_S + 2);
            while (next == null && System.nanoTime() < deadline) {
                for (Node n : nodes) {
                    String[] ev = n.events.poll(20, TimeUnit.MILLISECONDS);
                    if (ev != null) {
                        n.seen.add(ev);
                        assertEquals("GRANTED", ev[0], n.name + ": " + n.show());
                        next = n;
                        break;
                    }
                }
            }
            assertNotNull(next, "no instance led within TTL + 2 s of kill -9 of the leader");
            double takeover = (System.nanoTime() - killed) / 1e9;
            nodes.remove(next);
            Node follower = nodes.get(0);

            // 2. SIGSTOP the new leader past its TTL: the follower leads; after
            // SIGCONT the old leader is revoked within a heartbeat or two, and
            // from then on never both lead.
            next.signal("STOP");
            long stopped = System.nanoTime();
            long granted = follower.expect("GRANTED", TimeUnit.SECONDS.toMillis(TTL_S + 10));
            assertTrue(granted - stopped > TimeUnit.SECONDS.toNanos(TTL_S) / 2,
                    "the follower led before the frozen leader's lease could expire");
            long resumed = System.nanoTime();
            next.signal("CONT");
            long revoked = next.expect("REVOKED", 3 * HEARTBEAT_MS + 1500);
            double standDown = (revoked - resumed) / 1e9;
            // From here on exactly one leader: neither node changes its mind.
            next.quiet(4 * HEARTBEAT_MS);
            follower.quiet(HEARTBEAT_MS);
            System.out.printf("leader initiator: kill -9 -> new leader in %.2f s (TTL %d s); "
                    + "frozen leader revoked %.2f s after SIGCONT (heartbeat %d ms)%n",
                    takeover, TTL_S, standDown, HEARTBEAT_MS);
        }
    }
}
