package io.etcdlock.demo.spring;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

import org.junit.jupiter.api.Test;

/** {@link Toolchains}: a JDK 21+ is found among the installed ones when none is declared. */
class ToolchainsTest {

    /** The newest major version among the JDKs in /usr/lib/jvm, read from their release files. */
    static int newestInstalled() throws Exception {
        int newest = 0;
        Path jvm = Path.of("/usr/lib/jvm");
        if (!Files.isDirectory(jvm)) {
            return 0;
        }
        try (var homes = Files.list(jvm)) {
            for (Path h : (Iterable<Path>) homes::iterator) {
                Path release = h.resolve("release");
                if (Files.isReadable(release) && Files.isExecutable(h.resolve("bin/java"))) {
                    for (String line : Files.readAllLines(release)) {
                        if (line.startsWith("JAVA_VERSION=\"")) {
                            String v = line.substring(14).replaceFirst("^1\\.", "").replaceFirst("[^0-9].*$", "");
                            newest = Math.max(newest, Integer.parseInt(v));
                        }
                    }
                }
            }
        }
        return newest;
    }

    @Test
    void anInstalledJdkIsFoundWhereMavensDiscoveryLooks() throws Exception {
        Optional<String> found = Toolchains.installed(21);
        if (newestInstalled() >= 21) {
            assertTrue(found.isPresent(), "a JDK 21+ is installed in /usr/lib/jvm but was not found");
            String home = found.get();
            assertTrue(Files.isExecutable(Path.of(home, "bin", "java")), home);
        }
        assertTrue(Toolchains.installed(1000).isEmpty(), "no JDK 1000 anywhere");
    }
}
