package io.etcdlock.shedlock;

import static org.assertj.core.api.Assertions.assertThat;

import io.etcdlock.EtcdExtension;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.TestSupport;
import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A cron line ({@code etcdlock once shedlock/NAME}) and a {@code @SchedulerLock(name = "NAME")}
 * job take the same run-once record: while one has the job, the other skips it.
 */
@ExtendWith(EtcdExtension.class)
class CliOnceTest {
    private static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
        return new LockConfiguration(ClockProvider.now(), name, atMost, atLeast);
    }

    /** Run the CLI's {@code once} on the test etcd: its exit status. */
    private static int once(String job, String... flags) throws Exception {
        String cli = System.getProperty("etcdlock.cli", "");
        assertThat(new File(cli).canExecute())
                .as("no CLI at -Detcdlock.cli=%s: the etcdlock module's build makes it (cargo build -p"
                        + " etcdlock-cli, in generate-test-resources; with -pl add -am)", cli)
                .isTrue();
        List<String> cmd = new ArrayList<>(List.of(cli, "--endpoints", String.join(",", EtcdExtension.endpoints()),
                "once", "shedlock/" + job, "--at-most", "60s", "--skipped-exit", "3"));
        cmd.addAll(List.of(flags));
        cmd.addAll(List.of("--", "true"));
        Process p = new ProcessBuilder(cmd).inheritIO().start();
        assertThat(p.waitFor(20, TimeUnit.SECONDS)).as("etcdlock once ended").isTrue();
        return p.exitValue();
    }

    @Test
    void aCronLineAndASchedulerLockJobExcludeEachOther() throws Exception {
        String name = "job-" + UUID.randomUUID();
        try (EtcdLockClient client = TestSupport.client()) {
            EtcdLockProvider provider = new EtcdLockProvider(client);
            SimpleLock lock = provider.lock(config(name, Duration.ofMinutes(5), Duration.ZERO)).orElseThrow();
            assertThat(once(name)).as("the CLI skips a job Java holds").isEqualTo(3);
            lock.unlock();
            assertThat(once(name, "--at-least", "60s")).as("the CLI runs the freed job").isEqualTo(0);
            assertThat(provider.lock(config(name, Duration.ofMinutes(5), Duration.ZERO)))
                    .as("Java skips a job the CLI holds (--at-least)").isEmpty();
        }
    }
}
