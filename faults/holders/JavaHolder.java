import io.etcdlock.EtcdLockClient;
import io.etcdlock.EtcdLockException;
import io.etcdlock.LockGuard;
import io.etcdlock.LockLostException;
import io.etcdlock.LossReason;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Java holder process for the fault scenarios (the line protocol of python_holder.py and of
 * the Rust child), on the Java binding (the etcdlock jar, its JNI library from the jar).
 *
 * <p>Spec (JSON) in $ETCDLOCK_FAULTS_CHILD: endpoints, ns, ttl, lock, rounds,
 * request_timeout_ms (optional, default 2000), kind (only "mutex"). Prints:
 * <pre>
 *   HELD &lt;token&gt; &lt;acquired mono ns&gt; &lt;key&gt;
 *   PUT &lt;ok|error code&gt; &lt;call mono ns&gt; &lt;return mono ns&gt; &lt;ok|refused|unknown&gt;
 *   LOST &lt;reason&gt; &lt;last mono ns at which isHeld was true&gt; &lt;mono ns it turned false&gt;
 *   STALE &lt;ok|error code&gt; &lt;call mono ns&gt; &lt;return mono ns&gt; &lt;ok|refused|unknown&gt;
 *   DONE
 * </pre>
 * It holds until the hold is lost (or it is killed). The loss is polled with
 * {@code isHeld()} every 5 ms: the binding also delivers it as an event ({@code onLost}),
 * which the holder waits for as a cross-check, but only the poll gives the last instant the
 * holder believed it held, which the checker needs. {@code System.nanoTime()} is
 * CLOCK_MONOTONIC on Linux (HotSpot), the clock of the Rust side.
 *
 * <p>Built by faults/test.sh: {@code javac -cp etcdlock.jar JavaHolder.java}.
 */
public final class JavaHolder {
    private JavaHolder() {}

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static long mono() {
        return System.nanoTime();
    }

    // A minimal reader for the flat spec object the scenarios write.
    private static String str(String json, String key, String dflt) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(key) + "\"\\s*:\\s*\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(json);
        return m.find() ? m.group(1).replaceAll("\\\\(.)", "$1") : dflt;
    }

    private static long num(String json, String key, long dflt) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(key) + "\"\\s*:\\s*(-?[0-9]+)").matcher(json);
        return m.find() ? Long.parseLong(m.group(1)) : dflt;
    }

    private static List<String> endpoints(String json) {
        Matcher m = Pattern.compile("\"endpoints\"\\s*:\\s*\\[([^\\]]*)\\]").matcher(json);
        if (!m.find()) {
            throw new IllegalArgumentException("spec: no endpoints");
        }
        List<String> out = new ArrayList<>();
        Matcher s = Pattern.compile("\"([^\"]*)\"").matcher(m.group(1));
        while (s.find()) {
            out.add(s.group(1));
        }
        return out;
    }

    /** A guarded put, and what its outcome means for the history. */
    private static void guardedPut(String tag, LockGuard g, String res) {
        long call = mono();
        String name = "ok";
        String hist = "ok";
        try {
            g.put(res, Long.toString(g.fencingToken()));
        } catch (EtcdLockException e) {
            name = e.code().name();
            hist = e instanceof LockLostException && String.valueOf(e.getMessage()).contains("etcd rejected") ? "refused" : "unknown";
        }
        say(tag + " " + name + " " + call + " " + mono() + " " + hist);
    }

    public static void main(String[] args) throws Exception {
        String spec = System.getenv("ETCDLOCK_FAULTS_CHILD");
        if (spec == null) {
            throw new IllegalStateException("ETCDLOCK_FAULTS_CHILD is not set");
        }
        String lock = str(spec, "lock", "L");
        if (!str(spec, "kind", "mutex").equals("mutex")) {
            throw new IllegalArgumentException("only the mutex kind is supported");
        }
        String res = "res/" + lock;
        try (EtcdLockClient client = EtcdLockClient.builder()
                .endpoints(endpoints(spec))
                .ttl(Duration.ofSeconds(num(spec, "ttl", 2)))
                .namespace(str(spec, "ns", ""))
                .requestTimeout(Duration.ofMillis(num(spec, "request_timeout_ms", 2000)))
                .build()) {
            long rounds = num(spec, "rounds", 1);
            for (long r = 0; r < rounds; r++) {
                LockGuard g = client.newLock(lock).acquire();
                long acq = mono();
                say("HELD " + g.fencingToken() + " " + acq + " " + g.key());
                CompletableFuture<LossReason> lost = new CompletableFuture<>();
                g.onLost(lost::complete);
                guardedPut("PUT", g, res);
                // The clock is read before each isHeld, so a true answer proves the hold at
                // that instant even if the process is stopped between the two; the moment it
                // turned false is read after the answer, for the same reason.
                long lastTrue = acq;
                long t;
                while (true) {
                    t = mono();
                    if (!g.isHeld()) {
                        t = mono();
                        break;
                    }
                    lastTrue = t;
                    Thread.sleep(5);
                }
                // The event must agree with the poll (it may trail it a little).
                LossReason reason = lost.get(1, TimeUnit.SECONDS);
                if (!g.lossReason().equals(java.util.Optional.of(reason))) {
                    throw new IllegalStateException("onLost said " + reason + ", lossReason() " + g.lossReason());
                }
                say("LOST " + reason + " " + lastTrue + " " + t);
                guardedPut("STALE", g, res);
                try {
                    g.close();
                } catch (LockLostException expected) {
                    // a lost hold never closes cleanly
                }
            }
        }
        say("DONE");
    }
}
