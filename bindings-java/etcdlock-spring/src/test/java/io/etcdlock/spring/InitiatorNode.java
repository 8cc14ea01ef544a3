package io.etcdlock.spring;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ApplicationEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.integration.leader.event.OnGrantedEvent;
import org.springframework.integration.leader.event.OnRevokedEvent;

/**
 * One application JVM for {@link EtcdLeaderInitiatorTest}: a Spring context with the
 * auto-configured leader initiator. On a grant it writes its pid through the term's guarded put,
 * then prints {@code GRANTED <nanoTime> <fencing token>}; on a revoke {@code REVOKED <nanoTime>}
 * (System.nanoTime is CLOCK_MONOTONIC on Linux, so the parent can compare). Stops when its stdin
 * closes.
 *
 * <p>Args: endpoints (comma separated), election name, ttl seconds.
 */
public final class InitiatorNode {
    public static void main(String[] args) throws Exception {
        ApplicationListener<ApplicationEvent> listener = e -> {
            if (e instanceof OnGrantedEvent) {
                EtcdLeaderInitiator i = (EtcdLeaderInitiator) e.getSource();
                io.etcdlock.LeaderTerm t = i.currentTerm().orElseThrow();
                t.put(args[1] + "-owner", Long.toString(ProcessHandle.current().pid()));
                say("GRANTED " + System.nanoTime() + " " + t.fencingToken());
            } else if (e instanceof OnRevokedEvent) {
                say("REVOKED " + System.nanoTime());
            }
        };
        ConfigurableApplicationContext ctx = new SpringApplicationBuilder(EtcdLeaderInitiatorTest.App.class)
                .web(WebApplicationType.NONE).listeners(listener)
                .properties("etcdlock.endpoints=" + args[0], "etcdlock.ttl=" + args[2] + "s",
                        "etcdlock.leader.enabled=true", "etcdlock.leader.name=" + args[1],
                        "spring.main.banner-mode=off", "logging.level.root=warn")
                .run();
        say("STARTED " + System.nanoTime());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {
            // run until the parent closes our stdin
        }
        ctx.close();
        System.exit(0);
    }

    private static synchronized void say(String what) {
        System.out.println(what);
        System.out.flush();
    }

    private InitiatorNode() {
    }
}
