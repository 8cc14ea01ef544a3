package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Credentials and RBAC on an etcd of its own (auth enabled with etcdctl): good credentials
 * lock, bad ones are {@link AuthFailedException}, a prefix the role may not touch is
 * {@link PermissionDeniedException}.
 */
class AuthTest {
    static EtcdExtension.Etcd etcd;

    static void etcdctl(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("etcdctl", "--endpoints", String.join(",", etcd.endpoints)));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put("ETCDCTL_API", "3");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), "etcdctl " + String.join(" ", args) + ": " + out);
    }

    @BeforeAll
    static void start() throws Exception {
        etcd = EtcdExtension.Etcd.start();
        etcdctl("user", "add", "root:rootpw");
        etcdctl("user", "grant-role", "root", "root");
        etcdctl("user", "add", "app:apppw");
        etcdctl("role", "add", "app");
        etcdctl("role", "grant-permission", "app", "readwrite", "--prefix=true", "allowed/");
        etcdctl("user", "grant-role", "app", "app");
        etcdctl("auth", "enable");
    }

    @AfterAll
    static void stop() {
        etcd.close();
    }

    EtcdLockClient.Builder builder() {
        return EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(5))
                .connectTimeout(Duration.ofSeconds(5));
    }

    @Test
    void goodCredentialsLock() {
        try (EtcdLockClient c = builder().user("app", "apppw").build();
             LockGuard g = c.acquire("allowed/job", Duration.ofSeconds(5))) {
            assertTrue(g.isHeld());
            g.put("allowed/data", "1");
            assertEquals("1", g.get("allowed/data"));
        }
    }

    @Test
    void badPasswordIsAuthFailed() {
        assertThrows(AuthFailedException.class, () -> builder().user("app", "wrong").build().close());
    }

    @Test
    void forbiddenPrefixIsPermissionDenied() {
        try (EtcdLockClient c = builder().user("app", "apppw").build()) {
            EtcdLockException e = assertThrows(EtcdLockException.class, () -> c.acquire("forbidden/job", Duration.ofSeconds(5)));
            assertEquals(ErrorCode.PERMISSION_DENIED, e.code(), e.toString());
            assertTrue(e instanceof PermissionDeniedException);
        }
    }
}
