package io.etcdlock.demo;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The etcd a demo talks to: {@code ETCDLOCK_ENDPOINTS} if set, else a throw-away etcd on
 * 127.0.0.1 started with the testkit's {@code etcd-harness} ({@code ETCDLOCK_HARNESS}, or
 * {@code ../target/debug/etcd-harness}), stopped when the demo ends.
 */
public final class DemoEtcd implements AutoCloseable {
    private final Process harness;
    private final List<String> endpoints;
    private BufferedReader replies;

    private DemoEtcd(Process harness, List<String> endpoints) {
        this.harness = harness;
        this.endpoints = endpoints;
    }

    public static DemoEtcd start() throws Exception {
        String env = System.getenv("ETCDLOCK_ENDPOINTS");
        if (env != null && !env.isEmpty()) {
            return new DemoEtcd(null, List.of(env.split(",")));
        }
        String path = System.getProperty("etcdlock.harness", System.getenv("ETCDLOCK_HARNESS"));
        if (path == null || path.isEmpty()) {
            path = "../target/debug/etcd-harness";
        }
        if (!new File(path).canExecute()) {
            throw new IllegalStateException("set ETCDLOCK_ENDPOINTS, or build the harness: cargo build -p etcdlock-testkit");
        }
        Process p = new ProcessBuilder(path).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        Matcher m = Pattern.compile("\"endpoints\"\\s*:\\s*\\[([^\\]]*)\\]").matcher(line == null ? "" : line);
        if (!m.find()) {
            throw new IllegalStateException("etcd-harness said: " + line);
        }
        List<String> eps = new ArrayList<>();
        Matcher q = Pattern.compile("\"([^\"]+)\"").matcher(m.group(1));
        while (q.find()) {
            eps.add(q.group(1));
        }
        DemoEtcd etcd = new DemoEtcd(p, eps);
        etcd.replies = out;
        return etcd;
    }

    public List<String> endpoints() {
        return endpoints;
    }

    /**
     * Send the harness one command ({@code pause 0}: SIGSTOP member 0, {@code resume 0},
     * {@code kill 0}, {@code restart 0}) and return its one-line JSON answer; only for an etcd
     * this demo started.
     */
    public synchronized String command(String cmd) throws java.io.IOException {
        if (harness == null) {
            throw new IllegalStateException("not our etcd (ETCDLOCK_ENDPOINTS): cannot " + cmd);
        }
        harness.getOutputStream().write((cmd + "\n").getBytes(StandardCharsets.UTF_8));
        harness.getOutputStream().flush();
        String reply = replies.readLine();
        if (reply == null || !reply.contains("\"ok\"")) {
            throw new java.io.IOException("etcd-harness " + cmd + ": " + reply);
        }
        return reply;
    }

    @Override
    public void close() throws Exception {
        if (harness != null) {
            harness.getOutputStream().close();
            harness.waitFor();
        }
    }
}
