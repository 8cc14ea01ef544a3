package io.etcdlock.spring;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;

import org.springframework.integration.leader.Context;
import org.springframework.integration.leader.DefaultCandidate;
import org.springframework.integration.leader.event.LeaderEventPublisher;
import org.springframework.integration.support.leader.LockRegistryLeaderInitiator;

import io.etcdlock.EtcdLockClient;

/**
 * One app instance for {@link LeaderInitiatorTest}: Spring Integration's own
 * {@link LockRegistryLeaderInitiator} over an {@link EtcdLockRegistry}, run in
 * its own JVM. Prints {@code GRANTED <nanoTime>} and {@code REVOKED <nanoTime>}
 * (System.nanoTime is CLOCK_MONOTONIC on Linux, so the parent can compare) and
 * stops when its stdin closes.
 *
 * <p>Args: endpoints (comma separated), role, ttl seconds, heartbeat ms.
 */
public final class LeaderNode {
    public static void main(String[] args) throws Exception {
        String endpoints = args[0];
        String role = args[1];
        long ttl = Long.parseLong(args[2]);
        long heartbeat = Long.parseLong(args[3]);
        try (EtcdLockClient client = EtcdLockClient.builder()
                .endpoints(Arrays.asList(endpoints.split(",")))
                .ttl(Duration.ofSeconds(ttl))
                .build()) {
            EtcdLockRegistry registry = new EtcdLockRegistry(client, "leader-test");
            LockRegistryLeaderInitiator initiator =
                    new LockRegistryLeaderInitiator(registry, new DefaultCandidate(ProcessHandle.current().pid() + "", role));
            initiator.setHeartBeatMillis(heartbeat);
            initiator.setBusyWaitMillis(50);
            initiator.setLeaderEventPublisher(new LeaderEventPublisher() {
                @Override
                public void publishOnGranted(Object source, Context context, String r) {
                    say("GRANTED");
                }

                @Override
                public void publishOnRevoked(Object source, Context context, String r) {
                    say("REVOKED");
                }

                @Override
                public void publishOnFailedToAcquire(Object source, Context context, String r) {
                }
            });
            say("STARTED");
            initiator.start();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            while (in.readLine() != null) {
                // run until the parent closes our stdin
            }
            initiator.stop();
            initiator.destroy(); // its executor's thread is not a daemon
        }
        System.exit(0);
    }

    private static synchronized void say(String what) {
        System.out.println(what + " " + System.nanoTime());
        System.out.flush();
    }

    private LeaderNode() {
    }
}
