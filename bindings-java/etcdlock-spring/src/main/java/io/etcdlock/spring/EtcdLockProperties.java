package io.etcdlock.spring;

import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;

import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.convert.DurationUnit;

/**
 * {@code etcdlock.*} properties:
 *
 * <pre>
 * etcdlock.endpoints=http://10.0.0.1:2379,http://10.0.0.2:2379
 * etcdlock.ttl=15s
 * etcdlock.namespace=myapp/
 * etcdlock.username=app
 * etcdlock.password=secret
 * etcdlock.tls.ca=/etc/etcd/ca.pem
 * etcdlock.tls.cert=/etc/etcd/client.pem
 * etcdlock.tls.key=/etc/etcd/client-key.pem
 * etcdlock.registry-key=spring-integration
 * etcdlock.metrics.lock-name-tag=false
 * etcdlock.leader.enabled=true
 * etcdlock.leader.name=scheduler
 * etcdlock.leader.role=scheduler
 * </pre>
 *
 * An empty value is an unset one (the default, or none): {@code etcdlock.tls.ca=} or an
 * empty {@code ETCDLOCK_TLS_CA} variable is no CA file, as an empty {@code ETCDLOCK_*}
 * variable is in every etcdlock language.
 *
 * A duration without a unit is in seconds ({@code etcdlock.ttl=10} is 10 s), as in the
 * {@code ETCDLOCK_*} variables and every etcdlock language; {@code 500ms}, {@code 5s},
 * {@code 1m} work too.
 */
@ConfigurationProperties(prefix = "etcdlock")
public class EtcdLockProperties {
    private static final List<String> DEFAULT_ENDPOINTS = List.of("http://127.0.0.1:2379");
    private static final Duration DEFAULT_TTL = Duration.ofSeconds(15);

    /**
     * An empty value is an unset one, for every property, as for the {@code ETCDLOCK_*}
     * variables in every etcdlock language: {@code --etcdlock.tls.ca=} or an empty
     * {@code ETCDLOCK_TLS_CA} is no CA file, not a CA file named "".
     */
    static String unset(String value) {
        return value == null || value.isEmpty() ? null : value;
    }

    /** Whether to create the etcdlock beans. */
    private boolean enabled = true;
    /** etcd endpoints. */
    private List<String> endpoints = new ArrayList<>(DEFAULT_ENDPOINTS);
    /** Lease TTL: a crashed holder's locks are freed after at most this long. */
    @DurationUnit(ChronoUnit.SECONDS)
    private Duration ttl = DEFAULT_TTL;
    /** Prefix prepended to every key. */
    private String namespace;
    /** etcd username (with password). */
    private String username;
    /** etcd password. */
    private String password;
    /** Bound on connecting at startup. */
    @DurationUnit(ChronoUnit.SECONDS)
    private Duration connectTimeout;
    /** Bound on every call that does not wait for a lock (tryLock, unlock, guarded operations, status), retries and failover included (default 2 s). */
    @DurationUnit(ChronoUnit.SECONDS)
    private Duration requestTimeout;
    /**
     * Time between lease keep-alives (default 75 % of the TTL or TTL - margin - 5 s, whichever is
     * shorter, 8 s at TTL 15; at small TTLs TTL/3, at most (TTL - margin)/4, at least 250 ms).
     * When set: at least 50 ms, at most TTL - margin - min(5 s, half of TTL - margin).
     */
    @DurationUnit(ChronoUnit.SECONDS)
    private Duration keepaliveInterval;
    /** Safety margin taken off the TTL for local loss detection (default TTL/5, at most 2 s; at most half the TTL). */
    @DurationUnit(ChronoUnit.SECONDS)
    private Duration margin;
    /** Watch each held key so an outside delete is reported at once (default true). */
    private Boolean watchHeldKeys;
    /**
     * Start without reaching etcd (default false: the context fails to start when no member
     * answers within the connect timeout). With true the application starts while etcd is
     * down, the etcdlock health is DOWN until a member answers, and each lock call reaches
     * etcd within its own timeout.
     */
    private Boolean lazyConnect;
    /** Prefix of the LockRegistry's lock names. */
    private String registryKey = EtcdLockRegistry.DEFAULT_REGISTRY_KEY;
    /** TLS material (PEM files). */
    private final Tls tls = new Tls();
    /** Micrometer meters. */
    private final Metrics metrics = new Metrics();
    private final LockedMethods locked = new LockedMethods();
    /** Leader election of this application ({@link EtcdLeaderInitiator}). */
    private final LeaderElection leader = new LeaderElection();

    /** The leader initiator: {@code etcdlock.leader.*}. */
    public static class LeaderElection {
        /** Whether to run a leader initiator (granted while this instance leads). */
        private boolean enabled;
        /** The election name (a lock name); default: the role. */
        private String name;
        /** The role granted while leading, and the leader's proclamation; default: spring.application.name, else "application". */
        private String role;

        public boolean isEnabled() { return enabled; }
        public void setEnabled(boolean enabled) { this.enabled = enabled; }
        public String getName() { return name; }
        public void setName(String name) { this.name = unset(name); }
        public String getRole() { return role; }
        public void setRole(String role) { this.role = unset(role); }
    }

    /** The {@link Locked @Locked} annotation on bean methods. */
    public static class LockedMethods {
        /** Whether {@code @Locked} methods take their lock (an advisor and, if missing, an auto-proxy creator). */
        private boolean enabled = true;

        public boolean isEnabled() { return enabled; }
        public void setEnabled(boolean enabled) { this.enabled = enabled; }
    }

    /** Micrometer settings. */
    public static class Metrics {
        /**
         * Tag etcdlock.acquire with the lock name (tag "lock"): one time series per lock name,
         * so only for a bounded set of names.
         */
        private boolean lockNameTag;

        public boolean isLockNameTag() { return lockNameTag; }
        public void setLockNameTag(boolean lockNameTag) { this.lockNameTag = lockNameTag; }
    }

    /** TLS settings. */
    public static class Tls {
        /** CA bundle. */
        private String ca;
        /** Client certificate (mutual TLS). */
        private String cert;
        /** Client key (mutual TLS). */
        private String key;
        /** Server name to verify instead of the endpoint host. */
        private String domain;

        public String getCa() { return ca; }
        public void setCa(String ca) { this.ca = unset(ca); }
        public String getCert() { return cert; }
        public void setCert(String cert) { this.cert = unset(cert); }
        public String getKey() { return key; }
        public void setKey(String key) { this.key = unset(key); }
        public String getDomain() { return domain; }
        public void setDomain(String domain) { this.domain = unset(domain); }
    }

    public boolean isEnabled() { return enabled; }
    public void setEnabled(boolean enabled) { this.enabled = enabled; }
    public List<String> getEndpoints() { return endpoints; }
    /** Empty entries are dropped; none left (an empty property) is the default endpoint. */
    public void setEndpoints(List<String> endpoints) {
        List<String> given = new ArrayList<>();
        if (endpoints != null) {
            for (String e : endpoints) {
                if (unset(e) != null) {
                    given.add(e);
                }
            }
        }
        this.endpoints = given.isEmpty() ? new ArrayList<>(DEFAULT_ENDPOINTS) : given;
    }
    public Duration getTtl() { return ttl; }
    /** An empty property (null) is the default TTL. */
    public void setTtl(Duration ttl) { this.ttl = ttl == null ? DEFAULT_TTL : ttl; }
    public String getNamespace() { return namespace; }
    public void setNamespace(String namespace) { this.namespace = unset(namespace); }
    public String getUsername() { return username; }
    public void setUsername(String username) { this.username = unset(username); }
    public String getPassword() { return password; }
    public void setPassword(String password) { this.password = unset(password); }
    public Duration getConnectTimeout() { return connectTimeout; }
    public void setConnectTimeout(Duration connectTimeout) { this.connectTimeout = connectTimeout; }
    public Duration getRequestTimeout() { return requestTimeout; }
    public void setRequestTimeout(Duration requestTimeout) { this.requestTimeout = requestTimeout; }
    public Duration getMargin() { return margin; }
    public void setMargin(Duration margin) { this.margin = margin; }
    public Boolean getWatchHeldKeys() { return watchHeldKeys; }
    public void setWatchHeldKeys(Boolean watchHeldKeys) { this.watchHeldKeys = watchHeldKeys; }
    public Boolean getLazyConnect() { return lazyConnect; }
    public void setLazyConnect(Boolean lazyConnect) { this.lazyConnect = lazyConnect; }
    public Duration getKeepaliveInterval() { return keepaliveInterval; }
    public void setKeepaliveInterval(Duration keepaliveInterval) { this.keepaliveInterval = keepaliveInterval; }
    public String getRegistryKey() { return registryKey; }
    /** An empty property is the default key. */
    public void setRegistryKey(String registryKey) {
        this.registryKey = unset(registryKey) == null ? EtcdLockRegistry.DEFAULT_REGISTRY_KEY : registryKey;
    }
    public Tls getTls() { return tls; }
    public Metrics getMetrics() { return metrics; }
    public LockedMethods getLocked() { return locked; }
    public LeaderElection getLeader() { return leader; }
}
