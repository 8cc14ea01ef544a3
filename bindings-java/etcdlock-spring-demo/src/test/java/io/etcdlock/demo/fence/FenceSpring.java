package io.etcdlock.demo.fence;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.Fencing;
import io.etcdlock.LockGuard;
import io.etcdlock.LockLostException;
import io.etcdlock.StaleTokenException;
import io.etcdlock.demo.FencePostgres;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import javax.sql.DataSource;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.ConnectionCallback;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.annotation.EnableTransactionManagement;
import org.springframework.transaction.annotation.Transactional;

/**
 * {@link FencePostgres} in Spring: the deposit is a {@code @Transactional} method on
 * {@code JdbcTemplate}, fenced with the hold's token on the transaction's own connection.
 *
 * <p>Usage: {@code FenceSpring NAME ACCOUNT AMOUNT [--pause] [--no-fence]}, as FencePostgres
 * (etcd from ETCDLOCK_*, PostgreSQL from PG*); {@code scripts/fence_scenario.py} runs it.
 */
@Configuration
@EnableTransactionManagement
public class FenceSpring {
    /** The account service: each deposit is one transaction. */
    public static class Accounts {
        private final JdbcTemplate jdbc;

        public Accounts(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        public long balance(String id) {
            return jdbc.queryForObject("SELECT balance FROM accounts WHERE id = ?", Long.class, id);
        }

        /** Writes the new balance if {@code token} is the newest the database has seen for {@code lock}. */
        @Transactional
        public void write(String id, long balance, String lock, long token) {
            jdbc.execute((ConnectionCallback<Void>) c -> {
                Fencing.fence(c, lock, token); // StaleTokenException: the transaction rolls back
                return null;
            });
            jdbc.update("UPDATE accounts SET balance = ? WHERE id = ?", balance, id);
        }

        /** The same write without the fence: what a stale holder's write does to a newer one's. */
        @Transactional
        public void writeUnfenced(String id, long balance) {
            jdbc.update("UPDATE accounts SET balance = ? WHERE id = ?", balance, id);
        }
    }

    @Bean
    DataSource dataSource() {
        return new DriverManagerDataSource(FencePostgres.jdbcUrl());
    }

    @Bean
    PlatformTransactionManager transactionManager(DataSource dataSource) {
        return new DataSourceTransactionManager(dataSource);
    }

    @Bean
    Accounts accounts(DataSource dataSource) {
        return new Accounts(new JdbcTemplate(dataSource));
    }

    @Bean(destroyMethod = "close")
    EtcdLockClient etcdLockClient() {
        return EtcdLockClient.builder().build(); // ETCDLOCK_ENDPOINTS, ETCDLOCK_TTL
    }

    public static void main(String[] args) throws Exception {
        String name = args[0];
        String account = args[1];
        long amount = Long.parseLong(args[2]);
        List<String> flags = Arrays.asList(args);
        String lock = "account-" + account;
        try (AnnotationConfigApplicationContext ctx = new AnnotationConfigApplicationContext(FenceSpring.class)) {
            Accounts accounts = ctx.getBean(Accounts.class);
            LockGuard guard = ctx.getBean(EtcdLockClient.class).newLock(lock).acquire(Duration.ofSeconds(10));
            long token = guard.fencingToken();
            long balance = accounts.balance(account);
            System.out.println(name + ": token " + token + ", balance " + balance);
            System.out.flush();
            if (flags.contains("--pause")) { // a GC pause, a slow disk: the lease may expire here
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            }
            try {
                if (flags.contains("--no-fence")) {
                    accounts.writeUnfenced(account, balance + amount);
                } else {
                    accounts.write(account, balance + amount, lock, token);
                }
                System.out.println(name + ": wrote balance " + (balance + amount));
            } catch (StaleTokenException e) {
                System.out.println(name + ": refused: " + e.getMessage());
            }
            try {
                guard.close();
            } catch (LockLostException e) {
                System.out.println(name + ": the lock was lost: " + e.reason());
            }
        }
    }
}
