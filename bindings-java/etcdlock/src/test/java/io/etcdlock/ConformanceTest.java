package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.etcd.jetcd.Client;
import io.etcd.jetcd.options.DeleteOption;
import io.etcd.jetcd.options.GetOption;

/**
 * The conformance table ({@code conformance/cases.json}, read from the repository at test
 * time) run by the Java binding against the harness's real etcd. Every language's suite runs
 * the same table; {@code conformance/README.md} has the steps and how each outcome maps to
 * Java's idiom (an {@link EtcdLockException} subclass by its {@link ErrorCode},
 * {@code Optional.empty()} for {@code would_block}, ...). A case listed for Java that does not
 * run, or runs and disagrees with the table, fails this test.
 *
 * <p>{@link ConformanceMemTest} runs the table once more against the in-process etcd
 * ({@code mem://conformance}): every case but those marked {@code etcd_only}, while the etcd run
 * leaves out those marked {@code mem_only} (they use the store's fault controls, the {@code mem}
 * step). On {@code mem://} a case with {@code "etcd": "private"} gets a store of its own,
 * {@code mem://conf-ID}, whose {@link MemStore} the {@code etcd} step's {@code pause} and
 * {@code resume} become ({@code silence}, for {@code for_ms} or an hour, and {@code resume}), as
 * does the {@code mem} step; after every case, passed or failed, the runner resumes the case's
 * store. The raw steps ({@code keys}, {@code delete_outside}) reach a store with jetcd at the URL
 * it writes to {@code $ETCDLOCK_MEM_URL_DIR/NAME.url} (the module's pom sets the variable for the
 * test JVM). That run prints {@code conformance: N of M cases ran for java (mem)}.
 */
@ExtendWith(EtcdExtension.class)
class ConformanceTest {
    static final String LANG = "java";
    /**
     * Milliseconds added to every call's within_ms (conformance/README.md, "Time"): set by the
     * clean room's aarch64 runs under qemu-user only.
     */
    static final long SLACK_MS =
            Long.parseLong(System.getenv().getOrDefault("ETCDLOCK_CONFORMANCE_SLACK_MS", "0"));
    /** The in-process store the mem run uses (a case with a private etcd: {@code conf-ID}). */
    static final String MEM_STORE = "conformance";
    /** The silence of an {@code etcd} step's {@code pause} without {@code for_ms} on {@code mem://}. */
    static final Duration MEM_PAUSE = Duration.ofHours(1);

    /** {@code conformance/cases.json}, found from the module directory upwards (never a copy). */
    static File casesFile() {
        String explicit = System.getProperty("etcdlock.conformance");
        if (explicit != null && !explicit.isEmpty()) {
            return new File(explicit);
        }
        File dir = new File(System.getProperty("user.dir")).getAbsoluteFile();
        for (; dir != null; dir = dir.getParentFile()) {
            File f = new File(dir, "conformance/cases.json");
            if (f.isFile()) {
                return f;
            }
        }
        throw new IllegalStateException("conformance/cases.json not found above " + System.getProperty("user.dir"));
    }

    static boolean listedFor(JsonNode c) {
        JsonNode langs = c.get("langs");
        if (langs == null) {
            return true;
        }
        for (JsonNode l : langs) {
            if (LANG.equals(l.asText())) {
                return true;
            }
        }
        return false;
    }

    @Test
    void conformanceTable() throws Exception {
        table(false);
    }

    /** Every case listed for Java against etcd, or ({@code mem}) the in-process store. */
    static void table(boolean mem) throws Exception {
        Client memRaw = mem ? memRaw() : null;
        try {
            runTable(mem, memRaw);
        } finally {
            if (memRaw != null) {
                memRaw.close();
            }
        }
    }

    /**
     * A raw jetcd client on the in-process store {@code mem://conformance}: a client of the
     * library starts the store (or finds it started), which then has written its URL to
     * {@code $ETCDLOCK_MEM_URL_DIR/conformance.url}.
     */
    static Client memRaw() throws Exception {
        return memRaw(MEM_STORE);
    }

    /**
     * A raw jetcd client on the in-process store {@code mem://NAME}: opening the store starts it
     * (or finds it started), which then has written its URL to
     * {@code $ETCDLOCK_MEM_URL_DIR/NAME.url}.
     */
    static Client memRaw(String name) throws Exception {
        String dir = System.getenv("ETCDLOCK_MEM_URL_DIR");
        assertNotNull(dir, "ETCDLOCK_MEM_URL_DIR must be set for the mem run (the module's pom sets it)");
        File urlFile = new File(dir, name + ".url");
        assertTrue(urlFile.getParentFile().isDirectory() || urlFile.getParentFile().mkdirs(), "cannot make " + dir);
        MemStore.open(name);
        String url = new String(Files.readAllBytes(urlFile.toPath()), StandardCharsets.UTF_8).trim();
        return Client.builder().endpoints(url).build();
    }

    static void runTable(boolean mem, Client memRaw) throws Exception {
        File file = casesFile();
        JsonNode table = new ObjectMapper().readTree(file);
        JsonNode cases = table.get("cases");
        int expected = 0;
        int ran = 0;
        List<String> failures = new ArrayList<>();
        for (JsonNode c : cases) {
            if (!listedFor(c) || skipped(c, mem)) {
                continue;
            }
            expected++;
            String id = c.get("id").asText();
            long t0 = System.nanoTime();
            try {
                new CaseRun(c, memRaw).run();
                System.out.println("conformance: " + id + " ok (" + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) + " ms)");
            } catch (Throwable t) {
                failures.add(id + ": " + t);
                System.out.println("conformance: " + id + " FAILED: " + t);
            }
            ran++;
        }
        String lang = LANG + (mem ? " (mem)" : "");
        System.out.println("conformance: " + ran + " of " + cases.size() + " cases ran for " + lang);
        assertEquals(expected, ran, "every case listed for " + lang + " must run");
        assertTrue(failures.isEmpty(), failures.size() + " case(s) disagree with " + file + ":\n  "
                + String.join("\n  ", failures));
    }

    /**
     * Whether a case listed for Java is left out of this run: on {@code mem://} the cases that
     * kill etcd ({@code etcd_only}), on etcd those that use the store's controls
     * ({@code mem_only}).
     */
    static boolean skipped(JsonNode c, boolean mem) {
        return c.path(mem ? "etcd_only" : "mem_only").asBoolean(false);
    }

    /** A step's input that Java cannot express (the table should not list the case for Java). */
    static final class NotExpressible extends RuntimeException {
        NotExpressible(String what) {
            super(what + " is not expressible in Java");
        }
    }

    /** A string input: a JSON string, {@code {"repeat", "count"}} or {@code {"utf16": [...]}}. */
    static String text(JsonNode v) {
        if (v == null || v.isNull()) {
            throw new IllegalArgumentException("missing string input");
        }
        if (v.isTextual()) {
            return v.asText();
        }
        if (v.has("repeat")) {
            return v.get("repeat").asText().repeat(v.get("count").asInt());
        }
        if (v.has("utf16")) {
            JsonNode units = v.get("utf16");
            char[] cs = new char[units.size()];
            for (int i = 0; i < cs.length; i++) {
                cs[i] = (char) units.get(i).asInt();
            }
            return new String(cs);
        }
        throw new NotExpressible("string input " + v);
    }

    /** An error code or loss reason as the table spells it: INVALID_ARGUMENT -> InvalidArgument. */
    static String camel(String enumName) {
        StringBuilder sb = new StringBuilder();
        for (String part : enumName.split("_")) {
            sb.append(part.charAt(0)).append(part.substring(1).toLowerCase());
        }
        return sb.toString();
    }

    static String outcome(Runnable call) {
        try {
            call.run();
            return "ok";
        } catch (EtcdLockException e) {
            return camel(e.code().name());
        }
    }

    /** One case in its own namespace, with its own clients. */
    static final class CaseRun {
        final JsonNode c;
        final String id;
        final String ns;
        final Map<String, EtcdLockClient> clients = new LinkedHashMap<>();
        final Map<String, LockGuard> guards = new HashMap<>();
        final Map<String, EtcdLock> locks = new HashMap<>();
        final Map<String, MultiLockGuard> multis = new HashMap<>();
        final Map<String, Leadership> leaderships = new HashMap<>();
        final Map<String, EtcdLatch> latches = new HashMap<>();
        final Map<String, EtcdBarrier> barriers = new HashMap<>();
        /** One thread per {@code owner} of the {@code relock}/{@code unlock} steps (default {@code main}). */
        final Map<String, ExecutorService> owners = new HashMap<>();
        /** Calls started with {@code "background": true}: their outcome token and guard, for {@code join}. */
        final Map<String, CompletableFuture<Object[]>> calls = new HashMap<>();
        /** The case's own etcd ({@code "etcd": "private"}), else null: the shared one. */
        EtcdExtension.Etcd privateEtcd;
        /** A raw jetcd client on the private etcd, made on first use. */
        Client privateRaw;
        /** The mem run's raw client on {@code mem://conformance}, else null (the etcd run). */
        final Client memRaw;
        /**
         * The mem run's store for the case: {@code mem://conformance}, or {@code mem://conf-ID}
         * for a case with a private etcd; null in the etcd run.
         */
        MemStore store;
        /** A raw jetcd client on the case's own store ({@code conf-ID}), made on first use. */
        Client storeRaw;
        /** How long the step's library call took (see {@link #outcome}); -1 before it ran. */
        long tookNanos = -1;
        /** Steps that missed a time bound; the case goes on and fails at its end. */
        final List<String> late = new ArrayList<>();

        CaseRun(JsonNode c, Client memRaw) {
            this.c = c;
            this.memRaw = memRaw;
            this.id = c.get("id").asText();
            this.ns = "conf-java/" + id + "/" + UUID.randomUUID().toString().substring(0, 8) + "/";
        }

        List<String> endpoints() {
            if (privateEtcd != null) {
                return privateEtcd.endpoints;
            }
            return store != null ? List.of(store.endpoint()) : EtcdExtension.endpoints();
        }

        /** Raw etcd access (keys, delete_outside) on the etcd (or store) the case's clients use. */
        Client raw() throws Exception {
            if (store != null && !store.name().equals(MEM_STORE)) {
                if (storeRaw == null) {
                    storeRaw = memRaw(store.name());
                }
                return storeRaw;
            }
            if (privateEtcd == null) {
                return memRaw != null ? memRaw : TestSupport.raw();
            }
            if (privateRaw == null) {
                privateRaw = Client.builder().endpoints(privateEtcd.endpoints.toArray(new String[0])).build();
            }
            return privateRaw;
        }

        /** The library call of a step, timed on the monotonic clock for its within_ms / at_least_ms. */
        String outcome(Runnable call) {
            long t0 = System.nanoTime();
            try {
                return ConformanceTest.outcome(call);
            } finally {
                tookNanos = System.nanoTime() - t0;
            }
        }

        EtcdLockClient.Builder defaults() {
            return EtcdLockClient.builder().endpoints(endpoints()).namespace(ns)
                    .ttl(Duration.ofSeconds(10));
        }

        EtcdLockClient.Builder connectOptions(JsonNode o) {
            EtcdLockClient.Builder b = defaults();
            for (var it = o.fields(); it.hasNext();) {
                var e = it.next();
                JsonNode v = e.getValue();
                switch (e.getKey()) {
                    case "endpoints": {
                        List<String> eps = new ArrayList<>();
                        v.forEach(x -> eps.add(x.asText()));
                        b.endpoints(eps);
                        break;
                    }
                    case "ttl":
                        if (!v.isIntegralNumber()) {
                            throw new NotExpressible("ttl " + v + " (Builder.ttl takes a Duration)");
                        }
                        b.ttl(Duration.ofSeconds(v.asLong()));
                        break;
                    case "namespace":
                        b.namespace(text(v));
                        break;
                    case "margin_ms":
                        b.margin(Duration.ofMillis(v.asLong()));
                        break;
                    case "connect_timeout_ms":
                        b.connectTimeout(Duration.ofMillis(v.asLong()));
                        break;
                    case "request_timeout_ms":
                        b.requestTimeout(Duration.ofMillis(v.asLong()));
                        break;
                    default:
                        throw new IllegalArgumentException("unknown connect option " + e.getKey());
                }
            }
            return b;
        }

        LockGuard guard(JsonNode step, String field) {
            String var = step.get(field).asText();
            LockGuard g = guards.get(var);
            if (g == null) {
                throw new AssertionError("case " + id + ": no guard " + var);
            }
            return g;
        }

        /** The lock's keys: {@code <namespace><name>/} (a raw jetcd read or delete). */
        String prefix(JsonNode step) {
            return ns + text(step.get("name")) + "/";
        }

        void run() throws Exception {
            JsonNode steps = c.get("steps");
            boolean own = c.path("etcd").asText().equals("private");
            if (memRaw != null) {
                store = MemStore.open(own ? "conf-" + id : MEM_STORE);
            } else if (own) {
                privateEtcd = EtcdExtension.Etcd.start();
            }
            try {
                for (int i = 0; i < steps.size(); i++) {
                    step(i, steps.get(i));
                }
            } catch (AssertionError e) {
                if (late.isEmpty()) {
                    throw e;
                }
                throw new AssertionError(String.join("; ", late) + "; " + e.getMessage(), e);
            } finally {
                if (store != null) {
                    store.resume(); // a case that failed mid-silence leaves its store answering
                }
                owners.values().forEach(ExecutorService::shutdownNow);
                latches.values().forEach(EtcdLatch::close);
                barriers.values().forEach(EtcdBarrier::close);
                for (EtcdLockClient cl : clients.values()) {
                    try {
                        cl.close();
                    } catch (RuntimeException ignored) {
                        // already closed or failing: the case result stands
                    }
                }
                if (privateRaw != null) {
                    privateRaw.close();
                }
                if (storeRaw != null) {
                    storeRaw.close();
                }
                if (privateEtcd != null) {
                    privateEtcd.close(); // closes the harness's stdin: it stops etcd and exits
                }
            }
            if (!late.isEmpty()) {
                throw new AssertionError(String.join("; ", late));
            }
        }

        /**
         * The step's time bounds against its call's measured time: a miss is recorded in
         * {@link #late}, or returned when the outcome already failed (one message for both).
         */
        String checkTime(String where, JsonNode step, String op, boolean outcomeFailed) {
            if (op.equals("await_lost") || !(step.has("within_ms") || step.has("at_least_ms"))) {
                return ""; // await_lost's within_ms is its own wait bound, checked by the step
            }
            if (tookNanos < 0) {
                throw new IllegalArgumentException(where + ": time bounds on this op are not supported");
            }
            long took = TimeUnit.NANOSECONDS.toMillis(tookNanos);
            List<String> missed = new ArrayList<>();
            if (step.has("within_ms") && took > step.get("within_ms").asLong() + SLACK_MS) {
                missed.add("within " + step.get("within_ms").asLong() + " ms (+" + SLACK_MS + " ms slack)");
            }
            if (step.has("at_least_ms") && took < step.get("at_least_ms").asLong()) {
                missed.add("at least " + step.get("at_least_ms").asLong() + " ms");
            }
            if (missed.isEmpty()) {
                return outcomeFailed ? " (took " + took + " ms, in its bounds)" : "";
            }
            String msg = where + ": took " + took + " ms, the table says " + String.join(" and ", missed);
            if (outcomeFailed) {
                return " (" + msg + ")";
            }
            late.add(msg);
            System.out.println("conformance: " + msg);
            return "";
        }

        void step(int i, JsonNode step) throws Exception {
            String op = step.get("op").asText();
            String who = step.has("client") ? step.get("client").asText() : "a";
            JsonNode expect = step.has("expect_java") ? step.get("expect_java") : step.get("expect");
            String want = expect == null || expect.isNull() ? "null" : expect.isTextual() ? expect.asText() : expect.toString();
            String where = "case " + id + " step " + i + " (" + op + ")";
            tookNanos = -1;
            if (op.equals("etcd") || op.equals("mem")) {
                if (store != null) {
                    memAction(where, step);
                } else if (op.equals("mem")) {
                    throw new AssertionError(where + ": a mem step in the etcd run: mark the case mem_only");
                } else {
                    etcdAction(where, step);
                }
                checkTime(where, step, op, false);
                return;
            }
            if (!op.equals("connect") && !clients.containsKey(who)) {
                clients.put(who, defaults().build());
            }
            EtcdLockClient cl = clients.get(who);
            String got;
            switch (op) {
                case "connect": {
                    EtcdLockClient[] made = new EtcdLockClient[1];
                    got = outcome(() -> made[0] = connectOptions(step.get("options")).build());
                    if (made[0] != null) {
                        EtcdLockClient old = clients.put(who, made[0]);
                        if (old != null) {
                            old.close();
                        }
                    }
                    break;
                }
                case "lock": {
                    if (step.path("background").asBoolean(false)) {
                        // A worker thread blocked in acquire, as an application's would; `join` awaits it.
                        String name = text(step.get("name"));
                        Duration d = timeout(step);
                        AcquireOptions bo = acquireOptions(step);
                        CompletableFuture<Object[]> call = new CompletableFuture<>();
                        Thread worker = new Thread(() -> {
                            LockGuard[] bg = new LockGuard[1];
                            String r = ConformanceTest.outcome(() -> bg[0] = bo != null
                                    ? cl.acquire(name, d == null ? ChronoUnit.FOREVER.getDuration() : d, bo)
                                    : d == null ? cl.acquire(name) : cl.acquire(name, d));
                            call.complete(new Object[] {r, bg[0]});
                        }, "conformance-" + id + "-" + step.get("as").asText());
                        worker.setDaemon(true);
                        worker.start();
                        calls.put(step.get("as").asText(), call);
                        return;
                    }
                    String name = text(step.get("name"));
                    JsonNode t = step.get("timeout_ms");
                    LockGuard[] g = new LockGuard[1];
                    AcquireOptions opts = acquireOptions(step);
                    if (opts != null) {
                        Duration d = t != null && t.isTextual() && t.asText().equals("inf")
                                ? ChronoUnit.FOREVER.getDuration() : timeout(step);
                        got = outcome(() -> g[0] = cl.acquire(name, d, opts));
                    } else if (t == null) {
                        got = outcome(() -> g[0] = cl.acquire(name));
                    } else if (t.isTextual() && t.asText().equals("inf")) {
                        // Java's "forever" Duration (Long.MAX_VALUE seconds).
                        got = outcome(() -> g[0] = cl.acquire(name, ChronoUnit.FOREVER.getDuration()));
                    } else if (t.isIntegralNumber()) {
                        got = outcome(() -> g[0] = cl.acquire(name, Duration.ofMillis(t.asLong())));
                    } else {
                        throw new NotExpressible("timeout " + t + " (acquire takes a Duration)");
                    }
                    keep(step, g[0]);
                    break;
                }
                case "join": {
                    String var = step.get("call").asText();
                    CompletableFuture<Object[]> call = calls.remove(var);
                    if (call == null) {
                        throw new IllegalArgumentException(where + ": no background call " + var);
                    }
                    long t0 = System.nanoTime();
                    Object[] r;
                    try {
                        r = call.get(step.path("within_ms").asLong(60_000) + 1000, TimeUnit.MILLISECONDS);
                    } catch (TimeoutException e) {
                        throw new AssertionError(where + ": the background call " + var + " has not returned");
                    }
                    tookNanos = System.nanoTime() - t0;
                    got = (String) r[0];
                    if (r[1] != null) {
                        guards.put(var, (LockGuard) r[1]);
                    }
                    break;
                }
                case "try_lock": {
                    String name = text(step.get("name"));
                    @SuppressWarnings("unchecked")
                    Optional<LockGuard>[] g = new Optional[1];
                    got = outcome(() -> g[0] = cl.tryAcquire(name));
                    if (got.equals("ok")) {
                        if (g[0].isPresent()) {
                            keep(step, g[0].get());
                        } else {
                            got = "would_block";
                        }
                    }
                    break;
                }
                case "relock": {
                    // Through a reentrant java.util.concurrent.locks.Lock object, kept as `lock`,
                    // on the owner's own thread (EtcdLock is reentrant per thread). timeout_ms
                    // absent: lock(); 0: tryLock(); else tryLock(ms); a false is Timeout.
                    EtcdLock l = locks.computeIfAbsent(step.get("lock").asText(),
                            k -> cl.newLock(text(step.get("name"))));
                    JsonNode t = step.get("timeout_ms");
                    if (t != null && !t.isIntegralNumber()) {
                        throw new NotExpressible("relock timeout " + t + " (tryLock takes a long)");
                    }
                    LockGuard[] g = new LockGuard[1];
                    got = onOwner(step, () -> {
                        boolean[] took = {true};
                        String r = ConformanceTest.outcome(() -> {
                            if (t == null) {
                                l.lock();
                            } else if (t.asLong() == 0) {
                                took[0] = l.tryLock();
                            } else {
                                try {
                                    took[0] = l.tryLock(t.asLong(), TimeUnit.MILLISECONDS);
                                } catch (InterruptedException e) {
                                    throw new AssertionError("owner thread interrupted", e);
                                }
                            }
                        });
                        if (r.equals("ok") && !took[0]) {
                            return "Timeout";
                        }
                        if (r.equals("ok")) {
                            g[0] = l.guard();
                        }
                        return r;
                    });
                    keep(step, g[0]);
                    break;
                }
                case "acquire_permit":
                case "read_lock":
                case "campaign": {
                    String name = text(step.get("name"));
                    Duration t = timeout(step);
                    LockGuard[] g = new LockGuard[1];
                    Leadership[] l = new Leadership[1];
                    AcquireOptions opts = acquireOptions(step);
                    if (opts != null && !op.equals("acquire_permit")) {
                        throw new IllegalArgumentException(where + ": acquisition options on " + op + " are not in the table's steps");
                    }
                    if (op.equals("acquire_permit")) {
                        int permits = step.get("permits").asInt();
                        got = outcome(() -> g[0] = opts == null ? cl.acquirePermit(name, permits, t)
                                : cl.acquirePermit(name, permits, t, opts));
                    } else if (op.equals("read_lock")) {
                        got = outcome(() -> g[0] = cl.acquireRead(name, t));
                    } else {
                        byte[] value = text(step.get("value")).getBytes(java.nio.charset.StandardCharsets.UTF_8);
                        got = outcome(() -> l[0] = cl.campaign(name, value, t));
                        if (l[0] != null) {
                            g[0] = l[0].guard();
                            if (step.has("as")) {
                                leaderships.put(step.get("as").asText(), l[0]);
                            }
                        }
                    }
                    keep(step, g[0]);
                    break;
                }
                case "lock_many": {
                    JsonNode n = step.get("names");
                    List<String> names = new ArrayList<>();
                    if (n.isArray()) {
                        n.forEach(x -> names.add(text(x)));
                    } else {
                        for (int k = 0; k < n.get("count").asInt(); k++) {
                            names.add(n.get("prefix").asText() + k);
                        }
                    }
                    Duration t = timeout(step);
                    MultiLockGuard[] m = new MultiLockGuard[1];
                    got = outcome(() -> m[0] = cl.acquireAll(names, t));
                    if (m[0] != null && step.has("as")) {
                        multis.put(step.get("as").asText(), m[0]);
                    }
                    break;
                }
                case "proclaim": {
                    Leadership l = leaderships.get(step.get("guard").asText());
                    String value = text(step.get("value"));
                    got = outcome(() -> l.proclaim(value));
                    break;
                }
                case "leader": {
                    String name = text(step.get("name"));
                    @SuppressWarnings("unchecked")
                    Optional<Leader>[] l = new Optional[1];
                    got = outcome(() -> l[0] = cl.leader(name));
                    if (got.equals("ok")) {
                        got = l[0].map(Leader::valueAsString).orElse("null");
                    }
                    break;
                }
                case "unlock":
                    if (multis.containsKey(step.path("guard").asText())) {
                        got = outcome(multis.get(step.get("guard").asText())::close);
                    } else if (step.has("lock")) {
                        EtcdLock l = locks.get(step.get("lock").asText());
                        got = onOwner(step, () -> ConformanceTest.outcome(l::unlock));
                    } else {
                        got = outcome(guard(step, "guard")::unlock);
                    }
                    break;
                case "put": {
                    LockGuard g = guard(step, "guard");
                    String key = text(step.get("key"));
                    String value = text(step.get("value"));
                    got = outcome(() -> g.put(key, value));
                    break;
                }
                case "get": {
                    LockGuard g = guard(step, "guard");
                    String key = text(step.get("key"));
                    String[] v = new String[1];
                    got = outcome(() -> v[0] = g.get(key));
                    if (got.equals("ok")) {
                        got = v[0] == null ? "null" : v[0];
                    }
                    break;
                }
                case "delete": {
                    LockGuard g = guard(step, "guard");
                    String key = text(step.get("key"));
                    got = outcome(() -> g.delete(key));
                    break;
                }
                case "close":
                    got = outcome(cl::close);
                    break;
                case "state": {
                    LockGuard g = guard(step, "guard");
                    got = g.isHeld() ? "held" : g.lossReason().isPresent() ? "lost" : "released";
                    break;
                }
                case "keys": {
                    long t0 = System.nanoTime();
                    // With `await`: until the count is the table's (the step's within_ms bounds the wait).
                    long until = t0 + TimeUnit.MILLISECONDS.toNanos(step.path("await").asBoolean(false) ? step.get("within_ms").asLong() : 0);
                    got = countKeys(step);
                    while (!got.equals(want) && System.nanoTime() < until) {
                        Thread.sleep(10);
                        got = countKeys(step);
                    }
                    tookNanos = System.nanoTime() - t0;
                    break;
                }
                case "delete_outside":
                    raw().getKVClient().delete(bs(prefix(step)), DeleteOption.newBuilder().isPrefix(true).build())
                            .get(10, TimeUnit.SECONDS);
                    return;
                case "await_lost": {
                    LockGuard g = guard(step, "guard");
                    long within = step.get("within_ms").asLong();
                    CompletableFuture<LossReason> lost = new CompletableFuture<>();
                    g.onLost(lost::complete); // an event from the core, never a polling sleep
                    try {
                        got = camel(lost.get(within, TimeUnit.MILLISECONDS).name());
                    } catch (TimeoutException e) {
                        throw new AssertionError(where + ": no loss reported within " + within + " ms");
                    }
                    break;
                }
                case "status": {
                    String name = text(step.get("name"));
                    got = outcome(() -> cl.status(name)); // only the outcome is compared
                    break;
                }
                case "deadlocks": {
                    String prefix = text(step.get("prefix"));
                    Deadlocks[] d = new Deadlocks[1];
                    got = outcome(() -> d[0] = cl.deadlocks(prefix));
                    if (got.equals("ok")) {
                        got = Integer.toString(d[0].cycles().size());
                    }
                    break;
                }
                case "history": {
                    String name = text(step.get("name"));
                    LockHistory[] h = new LockHistory[1];
                    got = outcome(() -> h[0] = cl.history(name, null));
                    if (got.equals("ok")) {
                        List<String> ended = new ArrayList<>();
                        h[0].entries().forEach(e -> ended.add(e.ended().name().toLowerCase(java.util.Locale.ROOT)));
                        got = new ObjectMapper().writeValueAsString(ended);
                    }
                    break;
                }
                case "release": {
                    String name = text(step.get("name"));
                    long token = guard(step, "guard").fencingToken() + step.path("token_offset").asLong(0);
                    boolean[] r = new boolean[1];
                    got = outcome(() -> r[0] = cl.release(name, token));
                    if (got.equals("ok")) {
                        got = Boolean.toString(r[0]);
                    }
                    break;
                }
                case "latch": {
                    String name = text(step.get("name"));
                    long count = step.get("count").asLong();
                    EtcdLatch[] l = new EtcdLatch[1];
                    got = outcome(() -> l[0] = cl.latch(name, count));
                    if (l[0] != null && step.has("as")) {
                        latches.put(step.get("as").asText(), l[0]);
                    }
                    break;
                }
                case "count_down": {
                    EtcdLatch l = latch(step);
                    got = outcome(l::countDown);
                    break;
                }
                case "latch_count": {
                    EtcdLatch l = latch(step);
                    long[] n = new long[1];
                    got = outcome(() -> n[0] = l.getCount());
                    if (got.equals("ok")) {
                        got = Long.toString(n[0]);
                    }
                    break;
                }
                case "latch_wait": {
                    EtcdLatch l = latch(step);
                    Duration t = timeout(step);
                    got = outcome(() -> {
                        try {
                            if (t == null) {
                                l.await();
                            } else {
                                l.await(t);
                            }
                        } catch (InterruptedException e) {
                            throw new AssertionError(where + ": interrupted", e);
                        }
                    });
                    break;
                }
                case "barrier": {
                    String name = text(step.get("name"));
                    int parties = step.get("parties").asInt();
                    EtcdBarrier[] b = new EtcdBarrier[1];
                    got = outcome(() -> b[0] = cl.barrier(name, parties));
                    if (b[0] != null && step.has("as")) {
                        barriers.put(step.get("as").asText(), b[0]);
                    }
                    break;
                }
                case "barrier_wait": {
                    EtcdBarrier b = barriers.get(step.get("barrier").asText());
                    if (b == null) {
                        throw new AssertionError(where + ": no barrier " + step.get("barrier").asText());
                    }
                    Duration t = timeout(step);
                    got = outcome(() -> {
                        if (t == null) {
                            b.await();
                        } else {
                            b.await(t);
                        }
                    });
                    break;
                }
                case "token_same": {
                    long a = guard(step, "first").fencingToken();
                    long b = guard(step, "second").fencingToken();
                    got = a == b ? "ok" : "tokens differ (" + a + ", " + b + ")";
                    break;
                }
                case "token_order": {
                    long a = guard(step, "first").fencingToken();
                    long b = guard(step, "second").fencingToken();
                    got = a < b ? "ok" : "tokens not increasing (" + a + ", " + b + ")";
                    break;
                }
                default:
                    throw new IllegalArgumentException(where + ": unknown op");
            }
            String time = checkTime(where, step, op, !want.equals(got));
            assertEquals(want, got, where + ": got " + got + ", the table says " + want + time);
        }

        /** Op {@code etcd} (etcd run): pause, resume or kill the case's private etcd through its harness. */
        void etcdAction(String where, JsonNode step) throws Exception {
            if (privateEtcd == null) {
                throw new IllegalArgumentException(where + ": needs \"etcd\": \"private\" on the case");
            }
            String action = step.get("action").asText();
            if (!List.of("pause", "resume", "kill").contains(action)) {
                throw new IllegalArgumentException(where + ": unknown action " + action);
            }
            if (step.has("for_ms") && !action.equals("pause")) {
                throw new IllegalArgumentException(where + ": for_ms goes with pause only");
            }
            String cmd = action + " 0" + (step.has("for_ms") ? " " + step.get("for_ms").asLong() : "");
            long t0 = System.nanoTime();
            String reply = privateEtcd.command(cmd);
            tookNanos = System.nanoTime() - t0;
            if (!reply.replace(" ", "").contains("\"ok\":true")) {
                throw new AssertionError(where + ": etcd-harness answered " + reply + " to " + cmd);
            }
        }

        /**
         * Ops {@code mem} and (on {@code mem://}) {@code etcd}: a fault control of the case's
         * store. {@code pause} is a silence ({@code for_ms}, or {@link #MEM_PAUSE}), as
         * {@code silence} is; {@code expire} and {@code stall} act on the guard's lease.
         */
        void memAction(String where, JsonNode step) {
            String action = step.get("action").asText();
            JsonNode forMs = step.get("for_ms");
            long t0 = System.nanoTime();
            switch (action) {
                case "pause":
                case "silence":
                    store.silence(forMs == null ? MEM_PAUSE : Duration.ofMillis(forMs.asLong()));
                    break;
                case "resume":
                    store.resume();
                    break;
                case "expire":
                    assertTrue(store.expireLease(guard(step, "guard").leaseId()), where + ": no such lease in " + store);
                    break;
                case "stall":
                    if (forMs == null) {
                        throw new IllegalArgumentException(where + ": stall needs for_ms");
                    }
                    store.stall(guard(step, "guard").leaseId(), Duration.ofMillis(forMs.asLong()));
                    break;
                default:
                    throw new IllegalArgumentException(where + ": " + action
                            + " has no mem:// equivalent: mark the case etcd_only");
            }
            tookNanos = System.nanoTime() - t0;
        }

        /** A step's timeout: null (absent: wait as long as it takes) or milliseconds. */
        Duration timeout(JsonNode step) {
            JsonNode t = step.get("timeout_ms");
            if (t == null) {
                return null;
            }
            if (!t.isIntegralNumber()) {
                throw new NotExpressible("timeout " + t);
            }
            return Duration.ofMillis(t.asLong());
        }

        /** The latch a step names ({@code latch}). */
        EtcdLatch latch(JsonNode step) {
            EtcdLatch l = latches.get(step.get("latch").asText());
            if (l == null) {
                throw new AssertionError("case " + id + ": no latch " + step.get("latch").asText());
            }
            return l;
        }

        /**
         * A step's acquisition options ({@code lock_delay_ms}, {@code lease_time_ms},
         * {@code metadata}, {@code detect_deadlock}) as {@link AcquireOptions}; null when it has none. Values go to the
         * core unchecked (a negative lock-delay is a negative Duration).
         */
        AcquireOptions acquireOptions(JsonNode step) {
            if (!step.has("lock_delay_ms") && !step.has("lease_time_ms") && !step.has("metadata")
                    && !step.has("detect_deadlock")) {
                return null;
            }
            AcquireOptions.Builder b = AcquireOptions.builder();
            if (step.has("detect_deadlock")) {
                b.detectDeadlock(step.get("detect_deadlock").asBoolean());
            }
            for (String f : List.of("lock_delay_ms", "lease_time_ms")) {
                JsonNode v = step.get(f);
                if (v == null) {
                    continue;
                }
                if (!v.isIntegralNumber()) {
                    throw new NotExpressible(f + " " + v + " (a Duration)");
                }
                Duration d = Duration.ofMillis(v.asLong());
                if (f.equals("lock_delay_ms")) {
                    b.lockDelay(d);
                } else {
                    b.leaseTime(d);
                }
            }
            JsonNode m = step.get("metadata");
            if (m != null) {
                for (var it = m.fields(); it.hasNext();) {
                    var e = it.next();
                    b.metadata(e.getKey(), text(e.getValue()));
                }
            }
            return b.build();
        }

        /** etcd's own count of the keys under the step's lock prefix, as a decimal string. */
        String countKeys(JsonNode step) throws Exception {
            return Long.toString(raw().getKVClient()
                    .get(bs(prefix(step)), GetOption.newBuilder().isPrefix(true).withCountOnly(true).build())
                    .get(10, TimeUnit.SECONDS).getCount());
        }

        /**
         * Run a step's library call on the thread of its {@code owner} (default {@code main}),
         * one thread per owner name for the case, and time it as {@link #outcome} does.
         */
        String onOwner(JsonNode step, Callable<String> call) throws Exception {
            String owner = step.path("owner").asText("main");
            ExecutorService ex = owners.computeIfAbsent(owner, o -> Executors.newSingleThreadExecutor(r -> {
                Thread th = new Thread(r, "conformance-" + id + "-owner-" + o);
                th.setDaemon(true);
                return th;
            }));
            long t0 = System.nanoTime();
            try {
                return ex.submit(call).get(120, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                if (cause instanceof Exception) {
                    throw (Exception) cause;
                }
                throw (Error) cause;
            } finally {
                tookNanos = System.nanoTime() - t0;
            }
        }

        void keep(JsonNode step, LockGuard g) {
            if (g != null && step.has("as")) {
                guards.put(step.get("as").asText(), g);
            }
        }
    }
}
