package io.etcdlock.test.spring;

import org.springframework.test.context.TestContext;
import org.springframework.test.context.support.AbstractTestExecutionListener;

import io.etcdlock.MemStore;

/**
 * Resumes the {@link MemStore} beans of a Spring test's application context after each test
 * method (passed or failed), so a silence or stall a test started never reaches the next test of
 * a cached context. Registered for every Spring test through {@code META-INF/spring.factories};
 * a context without a {@code MemStore} bean is left alone.
 */
public class MemStoreTestExecutionListener extends AbstractTestExecutionListener {
    @Override
    public int getOrder() {
        return LOWEST_PRECEDENCE;
    }

    @Override
    public void afterTestMethod(TestContext testContext) {
        if (testContext.hasApplicationContext()) {
            testContext.getApplicationContext().getBeanProvider(MemStore.class).forEach(MemStore::resume);
        }
    }
}
