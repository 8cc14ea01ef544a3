import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;
import io.etcdlock.NativeLibrary;
import java.time.Duration;

/**
 * Windows smoke check (run by bindings-java/wine-check.sh under Wine): load the windows-x86_64
 * library through NativeLibrary, take a lock on the etcd named by args[0], write and read a key
 * under it, and print what happened.
 */
public class WineLock {
    public static void main(String[] args) throws Exception {
        try (EtcdLockClient client = EtcdLockClient.builder().endpoints(args[0]).ttl(Duration.ofSeconds(10)).build()) {
            System.out.println("platform " + NativeLibrary.platform() + ", library from " + NativeLibrary.loadedFrom());
            try (LockGuard guard = client.acquire("wine-check", Duration.ofSeconds(5))) {
                guard.put("wine-check-data", "held with token " + guard.fencingToken());
                System.out.println("locked: fencing token " + guard.fencingToken() + ", read back \"" + guard.get("wine-check-data") + "\"");
            }
            System.out.println("unlocked");
        }
    }
}
