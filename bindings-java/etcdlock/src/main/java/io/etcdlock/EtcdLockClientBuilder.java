package io.etcdlock;

import static io.etcdlock.Args.checkText;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Options for {@link EtcdLockClient}, from {@link EtcdLockClient#builder()}. An option not set
 * here comes from its {@code ETCDLOCK_*} environment variable ({@code ETCDLOCK_ENDPOINTS}, {@code ETCDLOCK_TTL},
 * {@code ETCDLOCK_NAMESPACE}, {@code ETCDLOCK_USERNAME}, {@code ETCDLOCK_PASSWORD},
 * {@code ETCDLOCK_TLS_CA}, {@code ETCDLOCK_TLS_CERT}, {@code ETCDLOCK_TLS_KEY},
 * {@code ETCDLOCK_TLS_DOMAIN}, {@code ETCDLOCK_CONNECT_TIMEOUT},
 * {@code ETCDLOCK_REQUEST_TIMEOUT}, {@code ETCDLOCK_MARGIN}, {@code ETCDLOCK_WATCH_HELD_KEYS},
 * {@code ETCDLOCK_KEEPALIVE_INTERVAL}, {@code ETCDLOCK_LAZY_CONNECT}), else the default: endpoint
 * {@code http://127.0.0.1:2379}, TTL 15 s, no namespace, no auth, plaintext. An option set
 * here wins, and a malformed variable for it is ignored: the rule core applies for every
 * language. The core checks every value ({@link InvalidArgumentException} from
 * {@link #build()} names the option); a setter only turns its Java value into the option.
 */
public class EtcdLockClientBuilder {
    /** The client's logger: a connect is logged where the client logs its close. */
    private static final Logger LOG = LoggerFactory.getLogger(EtcdLockClient.class);
    /** Core option keys and their values in core's syntax, in the order set. */
    private final Map<String, String> options = new LinkedHashMap<>();
    private boolean releaseOnExit;
    /** An io.opentelemetry.api.OpenTelemetry, or null: the global one. */
    private Object openTelemetry;

    EtcdLockClientBuilder() {}

    private EtcdLockClientBuilder option(String key, String value) {
        options.put(key, value);
        return this;
    }

    /** etcd endpoints ({@code http://host:port}, {@code https://...} with TLS, or {@code host:port}). */
    public EtcdLockClientBuilder endpoints(String... endpoints) {
        if (endpoints == null) {
            throw new InvalidArgumentException("endpoints must not be null");
        }
        return endpoints(Arrays.asList(endpoints));
    }

    /** etcd endpoints. */
    public EtcdLockClientBuilder endpoints(List<String> endpoints) {
        if (endpoints == null) {
            throw new InvalidArgumentException("endpoints must not be null");
        }
        // Not endpoints.contains(null): List.of(...) lists throw NullPointerException for it.
        for (String e : endpoints) {
            if (e == null) {
                throw new InvalidArgumentException("endpoints must not be null");
            }
            checkText(e, "endpoint");
        }
        // "," for an empty list: core refuses it ("no etcd endpoints given").
        return option("endpoints", endpoints.isEmpty() ? "," : String.join(",", endpoints));
    }

    /**
     * Lease TTL (whole seconds, rounded up; between 1 s and 9,000,000,000 s). A holder that
     * dies releases its locks after at most this long.
     */
    public EtcdLockClientBuilder ttl(Duration ttl) {
        if (ttl == null) {
            throw new InvalidArgumentException("ttl must not be null");
        }
        long s = ttl.getSeconds() + (ttl.getNano() > 0 ? 1 : 0);
        return option("ttl", Long.toString(s));
    }

    /** Prefix prepended to every key this client touches (lock keys and guarded keys). */
    public EtcdLockClientBuilder namespace(String namespace) {
        return option("namespace", checkText(namespace, "namespace"));
    }

    /** etcd username and password. */
    public EtcdLockClientBuilder user(String user, String password) {
        if (user == null || password == null) {
            throw new InvalidArgumentException("user and password must not be null");
        }
        option("username", checkText(user, "user"));
        return option("password", checkText(password, "password"));
    }

    /** TLS with a CA bundle and, for mutual TLS, a client certificate and key (PEM files; cert/key may be null). */
    public EtcdLockClientBuilder tls(Path ca, Path cert, Path key) {
        if (ca == null && cert == null && key == null) {
            throw new InvalidArgumentException("tls needs at least a CA file");
        }
        if (ca != null) {
            option("tls_ca", ca.toString());
        }
        if (cert != null) {
            option("tls_cert", cert.toString());
        }
        return key == null ? this : option("tls_key", key.toString());
    }

    /** Server name to verify instead of the endpoint host (TLS only). */
    public EtcdLockClientBuilder tlsDomain(String domain) {
        return option("tls_domain", checkText(domain, "tlsDomain"));
    }

    /** Bound on reaching etcd at connect time (default 5 s). */
    public EtcdLockClientBuilder connectTimeout(Duration d) {
        return option("connect_timeout", Args.duration(d, "connectTimeout"));
    }

    /** Bound on every call that does not wait for a lock (tryLock, unlock, guarded operations, status, ping), retries and failover included: {@code UnavailableException} after it (default 2 s). Lock calls are bounded by their own timeout. */
    public EtcdLockClientBuilder requestTimeout(Duration d) {
        return option("request_timeout", Args.duration(d, "requestTimeout"));
    }

    /**
     * Safety margin subtracted from the TTL for local loss detection (default: TTL/5, at
     * most 2 s). At most half the TTL: {@link #build()} rejects a larger one with
     * {@link InvalidArgumentException} (never clamped).
     */
    public EtcdLockClientBuilder margin(Duration margin) {
        return option("margin", Args.duration(margin, "margin"));
    }

    /**
     * Time between lease keep-alives (default 75 % of the TTL or TTL - margin - 5 s, whichever
     * is shorter, 8 s at TTL 15; at small TTLs TTL/3, at most (TTL - margin)/4, at least 250 ms):
     * when set, at least 50 ms and at most TTL - margin - min(5 s, half of TTL - margin), else
     * {@link #build()} throws {@link InvalidArgumentException}.
     */
    public EtcdLockClientBuilder keepaliveInterval(Duration interval) {
        return option("keepalive_interval", Args.duration(interval, "keepaliveInterval"));
    }

    /**
     * Watch each held key so an outside delete is reported at once (default true); with
     * false such a delete is noticed only by a guarded operation.
     */
    public EtcdLockClientBuilder watchHeldKeys(boolean watch) {
        return option("watch_held_keys", Boolean.toString(watch));
    }

    /**
     * Connect on first use (default false: {@link #build()} throws
     * {@link UnavailableException} within the connect timeout when no member answers). With
     * true, {@code build()} only checks the options, so an application starts while etcd is
     * briefly down; {@link EtcdLockClient#ping()} throws until a member answers, and each
     * call reaches etcd within its own bound (a lock call its timeout, others the request
     * timeout).
     */
    public EtcdLockClientBuilder lazyConnect(boolean lazy) {
        return option("lazy_connect", Boolean.toString(lazy));
    }

    /**
     * Close the client from a JVM shutdown hook (SIGTERM, SIGINT, SIGHUP, {@code System.exit}),
     * so its locks are free at once instead of after the TTL; {@link EtcdLockClient#close()} removes
     * the hook.
     * Default false. Spring's starter closes its client when the context closes, which a
     * graceful shutdown does after draining; this is for plain Java programs.
     */
    public EtcdLockClientBuilder releaseOnExit(boolean release) {
        this.releaseOnExit = release;
        return this;
    }

    /**
     * The OpenTelemetry instance the client's spans ({@code etcdlock.acquire},
     * {@code etcdlock.hold}) go to, instead of the global one ({@code GlobalOpenTelemetry},
     * once it is set). Spans need the OpenTelemetry API ({@code io.opentelemetry:opentelemetry-api})
     * on the class path, an optional dependency of etcdlock: without it, or with no SDK
     * configured, the client makes none. See the README's "OpenTelemetry" section.
     *
     * @param openTelemetry null: the global one
     */
    public EtcdLockClientBuilder openTelemetry(io.opentelemetry.api.OpenTelemetry openTelemetry) {
        this.openTelemetry = openTelemetry;
        return this;
    }

    /**
     * Connect and open the session (grant the lease).
     *
     * @throws UnavailableException if no endpoint answers within the connect timeout
     * @throws AuthFailedException on bad credentials
     * @throws InvalidArgumentException on bad options
     */
    public EtcdLockClient build() {
        NativeBridge.ensureLoaded();
        CoreLogs.sync();
        String[] pairs = new String[options.size() * 2];
        int i = 0;
        for (Map.Entry<String, String> e : options.entrySet()) {
            pairs[i++] = e.getKey();
            pairs[i++] = e.getValue();
        }
        long ptr = NativeBridge.connect(pairs);
        String eps = NativeBridge.endpoints(ptr);
        LOG.debug("etcdlock client connected to {}", eps);
        EtcdLockClient client = new EtcdLockClient(ptr, eps, Telemetry.of(openTelemetry));
        if (releaseOnExit) {
            client.exitHook.register(client::close);
        }
        return client;
    }
}
