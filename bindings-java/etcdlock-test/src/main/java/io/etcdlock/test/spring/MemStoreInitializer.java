package io.etcdlock.test.spring;

import java.util.Map;

import org.springframework.context.ApplicationContextInitializer;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.env.MapPropertySource;

import io.etcdlock.MemStore;
import io.etcdlock.test.EtcdLockExtension;

/**
 * Points a Spring test's application context at an in-process store of its own: sets
 * {@code etcdlock.endpoints} to the store's {@code mem://NAME} (above every other property
 * source, so the starter's {@code EtcdLockClient} bean connects to it) and registers the
 * {@link MemStore} as a bean, for the test to inject and act on:
 *
 * <pre>{@code
 * @SpringBootTest
 * @ContextConfiguration(initializers = MemStoreInitializer.class)
 * class StockJobTest {
 *     @Autowired EtcdLockClient client;  // the starter's, on the store
 *     @Autowired MemStore store;
 *     ...
 * }
 * }</pre>
 *
 * One store per application context: a context Spring caches for several test classes keeps its
 * store. After each test method the store is resumed ({@link MemStoreTestExecutionListener}), so
 * a silence or stall never reaches the next test.
 */
public class MemStoreInitializer implements ApplicationContextInitializer<ConfigurableApplicationContext> {
    /** The name of the {@link MemStore} bean. */
    public static final String BEAN_NAME = "etcdLockMemStore";

    @Override
    public void initialize(ConfigurableApplicationContext context) {
        MemStore store = EtcdLockExtension.newStore("spring");
        context.getEnvironment().getPropertySources()
                .addFirst(new MapPropertySource("etcdlock-mem-store", Map.of("etcdlock.endpoints", store.endpoint())));
        context.getBeanFactory().registerSingleton(BEAN_NAME, store);
    }
}
