package io.etcdlock;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Starts one real etcd for the whole test run with the testkit's {@code etcd-harness}
 * (path from the system property {@code etcdlock.harness} or env {@code ETCDLOCK_HARNESS}),
 * reads its JSON line, and stops it at the end by closing the harness's stdin. A missing
 * harness fails the tests (it never skips them).
 */
public final class EtcdExtension implements BeforeAllCallback {
    private static Etcd etcd;

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        synchronized (EtcdExtension.class) {
            if (etcd == null) {
                Etcd e = Etcd.start();
                context.getRoot().getStore(ExtensionContext.Namespace.GLOBAL).put("etcdlock-etcd",
                        (ExtensionContext.Store.CloseableResource) () -> {
                            synchronized (EtcdExtension.class) {
                                e.close();
                                etcd = null;
                            }
                        });
                etcd = e;
            }
        }
    }

    /** The running etcd's endpoints. */
    public static synchronized List<String> endpoints() {
        if (etcd == null) {
            throw new IllegalStateException("EtcdExtension not active");
        }
        return etcd.endpoints;
    }

    /** One harness process and the etcd it runs. */
    public static final class Etcd implements AutoCloseable {
        public final List<String> endpoints;
        private final Process process;
        private final OutputStream stdin;
        private final BufferedReader stdout;

        private Etcd(Process process, BufferedReader stdout, List<String> endpoints) {
            this.process = process;
            this.stdin = process == null ? null : process.getOutputStream();
            this.stdout = stdout;
            this.endpoints = endpoints;
        }

        /** Send a harness command ({@code pause 0}, {@code resume 0}, {@code kill 0}, ...); returns its JSON reply. */
        public synchronized String command(String cmd) throws IOException {
            stdin.write((cmd + "\n").getBytes(StandardCharsets.UTF_8));
            stdin.flush();
            String reply = stdout.readLine();
            if (reply == null || reply.contains("\"error\"")) {
                throw new IOException("etcd-harness " + cmd + ": " + reply);
            }
            return reply;
        }

        /** An etcd gRPC proxy the harness runs in front of the members: its index and endpoint. */
        public static final class Proxy {
            public final int index;
            public final String endpoint;

            Proxy(int index, String endpoint) {
                this.index = index;
                this.endpoint = endpoint;
            }
        }

        /** Start a gRPC proxy in front of etcd ({@code proxy}); a client connected through it can be partitioned. */
        public Proxy proxy() throws IOException {
            String reply = command("proxy");
            Matcher i = Pattern.compile("\"proxy\"\\s*:\\s*(\\d+)").matcher(reply);
            Matcher e = Pattern.compile("\"endpoint\"\\s*:\\s*\"([^\"]+)\"").matcher(reply);
            if (!i.find() || !e.find()) {
                throw new IOException("unexpected etcd-harness proxy reply: " + reply);
            }
            return new Proxy(Integer.parseInt(i.group(1)), e.group(1));
        }

        /** Partition the clients connected through proxy {@code p} from etcd ({@code proxy-pause I}). */
        public void proxyPause(Proxy p) throws IOException {
            command("proxy-pause " + p.index);
        }

        /** Reconnect them ({@code proxy-resume I}). */
        public void proxyResume(Proxy p) throws IOException {
            command("proxy-resume " + p.index);
        }

        /**
         * The etcd at {@code ETCDLOCK_BENCH_ENDPOINTS} (comma separated) if set, one
         * that someone else runs and closing leaves alone (bench/languages.sh runs
         * every language against one etcd); otherwise {@link #start}.
         */
        public static Etcd startOrExternal() throws IOException {
            String eps = System.getenv("ETCDLOCK_BENCH_ENDPOINTS");
            if (eps != null && !eps.isEmpty()) {
                return new Etcd(null, null, new ArrayList<>(java.util.Arrays.asList(eps.split(","))));
            }
            return start();
        }

        public static Etcd start(String... args) throws IOException {
            String harness = System.getProperty("etcdlock.harness");
            if (harness == null || harness.isEmpty()) {
                harness = System.getenv("ETCDLOCK_HARNESS");
            }
            if (harness == null || !new File(harness).canExecute()) {
                throw new IllegalStateException("etcd-harness not found at " + harness
                        + " (build it: cargo build -p etcdlock-testkit; or set -Detcdlock.harness)");
            }
            List<String> cmd = new ArrayList<>();
            cmd.add(harness);
            cmd.addAll(List.of(args));
            Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            String line = out.readLine();
            if (line == null) {
                throw new IllegalStateException("etcd-harness exited without printing its endpoints");
            }
            Matcher m = Pattern.compile("\"endpoints\"\\s*:\\s*\\[([^\\]]*)\\]").matcher(line);
            if (!m.find()) {
                throw new IllegalStateException("unexpected etcd-harness output: " + line);
            }
            List<String> eps = new ArrayList<>();
            Matcher q = Pattern.compile("\"([^\"]+)\"").matcher(m.group(1));
            while (q.find()) {
                eps.add(q.group(1));
            }
            return new Etcd(p, out, eps);
        }

        @Override
        public void close() {
            if (process == null) {
                return;
            }
            try {
                stdin.close();
                process.waitFor();
                stdout.close(); // a case's private harness is one of many in the run: free its pipe now
            } catch (IOException | InterruptedException e) {
                process.destroy();
            }
        }
    }
}
