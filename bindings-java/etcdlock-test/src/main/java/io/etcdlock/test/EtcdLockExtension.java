package io.etcdlock.test;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.EtcdLockClientBuilder;
import io.etcdlock.InvalidArgumentException;
import io.etcdlock.MemStore;

/**
 * A JUnit 5 extension for code that takes etcdlock locks: each test method gets an in-process
 * store of its own ({@code mem://NAME}: etcd's API, leases, revisions and watches inside the JVM,
 * so every lock behaves as on etcd) and the parameters it asks for:
 *
 * <ul>
 *   <li>{@link MemStore}: the test's store, with its fault controls ({@link MemStore#expireLease},
 *       {@link MemStore#deleteKey}, {@link MemStore#silence}, {@link MemStore#stall});</li>
 *   <li>{@link EtcdLockClient}: a client connected to that store; each such parameter is a client
 *       of its own (two parameters: two instances of a service).</li>
 * </ul>
 *
 * After the test (passed or failed) the store is {@linkplain MemStore#resume() resumed} and every
 * client the extension made is closed. A {@code @BeforeEach} or {@code @AfterEach} method of the
 * test gets the same store (and clients of their own). Use it through {@link EtcdLockTest}, or
 * registered in a field to choose the clients' options:
 *
 * <pre>{@code
 * class LossTest {
 *     @RegisterExtension
 *     static EtcdLockExtension etcdlock = EtcdLockExtension.withClients(b -> b.ttl(Duration.ofSeconds(3)));
 *
 *     @Test
 *     void pausesWhenAtRisk(EtcdLockClient client, MemStore store) { ... }
 * }
 * }</pre>
 *
 * (Not both on one class: two extensions would both offer the parameters, which JUnit refuses.)
 * Stores are named after the test ({@code OrdersTest.method-7}); they live until the JVM exits,
 * like every in-process store. With {@code ETCDLOCK_MEM_URL_DIR} set, each store writes its
 * {@code http://127.0.0.1:PORT} URL to {@code <dir>/<name>.url}, for a tool of the test's own
 * (etcdctl, jetcd) to look at the keys.
 */
public final class EtcdLockExtension implements ParameterResolver {
    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(EtcdLockExtension.class);
    private static final AtomicLong SEQ = new AtomicLong();
    /** A store name: up to 64 of these. */
    private static final int MAX_NAME = 64;

    private final Consumer<? super EtcdLockClientBuilder> clientOptions;

    /** The extension with clients of the default options (what {@link EtcdLockTest} registers). */
    public EtcdLockExtension() {
        this(b -> { });
    }

    private EtcdLockExtension(Consumer<? super EtcdLockClientBuilder> clientOptions) {
        this.clientOptions = clientOptions;
    }

    /**
     * The extension whose clients are built with {@code options} applied to their builder (the
     * endpoint is the test's store; set the TTL, request timeout, namespace, ...). A short TTL
     * ({@code b.ttl(Duration.ofSeconds(3))}) makes a silenced or stalled hold be lost in about
     * three seconds.
     *
     * @throws InvalidArgumentException if {@code options} is null
     */
    public static EtcdLockExtension withClients(Consumer<? super EtcdLockClientBuilder> options) {
        if (options == null) {
            throw new InvalidArgumentException("options must not be null");
        }
        return new EtcdLockExtension(options);
    }

    /**
     * A store of its own, named {@code hint-N} (the characters a store name cannot have become
     * {@code _}): for a test that manages its store itself, e.g. a Spring
     * {@code @DynamicPropertySource} that sets {@code etcdlock.endpoints} to its
     * {@link MemStore#endpoint()}.
     */
    public static MemStore newStore(String hint) {
        String suffix = "-" + SEQ.incrementAndGet();
        StringBuilder name = new StringBuilder();
        String h = hint == null || hint.isEmpty() ? "test" : hint;
        for (int i = 0; i < h.length() && name.length() + suffix.length() < MAX_NAME; i++) {
            char c = h.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
                    || c == '_' || c == '-';
            name.append(ok ? c : '_');
        }
        return MemStore.open(name.append(suffix).toString());
    }

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        Class<?> type = parameter.getParameter().getType();
        return type == MemStore.class || type == EtcdLockClient.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        Fixture f = context.getStore(NAMESPACE).getOrComputeIfAbsent(Fixture.class,
                k -> new Fixture(newStore(storeHint(context))), Fixture.class);
        if (parameter.getParameter().getType() == MemStore.class) {
            return f.store;
        }
        try {
            return f.client(clientOptions);
        } catch (RuntimeException e) {
            throw new ParameterResolutionException("cannot connect a client to " + f.store.endpoint() + ": " + e, e);
        }
    }

    /** {@code Class.method} of the test (or the class alone, for a class-level parameter). */
    private static String storeHint(ExtensionContext context) {
        String cls = context.getTestClass().map(Class::getSimpleName).orElse("test");
        return context.getTestMethod().map(Method::getName).map(m -> cls + "." + m).orElse(cls);
    }

    /** One test's store and the clients made on it; closed with the test's context. */
    static final class Fixture implements ExtensionContext.Store.CloseableResource {
        final MemStore store;
        private final List<EtcdLockClient> clients = new ArrayList<>();

        Fixture(MemStore store) {
            this.store = store;
        }

        synchronized EtcdLockClient client(Consumer<? super EtcdLockClientBuilder> options) {
            EtcdLockClientBuilder b = EtcdLockClient.builder();
            options.accept(b);
            // The test's store, whatever the options say (a stray ETCDLOCK_ENDPOINTS neither).
            EtcdLockClient c = b.endpoints(store.endpoint()).build();
            clients.add(c);
            return c;
        }

        /** Resume the store first, so the clients' close is answered at once. */
        @Override
        public synchronized void close() {
            store.resume();
            RuntimeException first = null;
            for (int i = clients.size() - 1; i >= 0; i--) {
                try {
                    clients.get(i).close();
                } catch (RuntimeException e) {
                    if (first == null) {
                        first = e;
                    }
                }
            }
            clients.clear();
            if (first != null) {
                throw first;
            }
        }
    }
}
