package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** The three ways the native library is found, each in a fresh JVM. */
class NativeLibraryTest {
    static final String BUNDLED = "/native/linux-x86_64/libetcdlock_jni.so";

    static String probe(String... jvmArgs) throws Exception {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> cmd = new ArrayList<>(List.of(java));
        cmd.addAll(List.of(jvmArgs));
        cmd.addAll(List.of("-cp", cp, LoaderProbe.class.getName()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        return out;
    }

    @Test
    void extractsTheBundledCopyByDefault() throws Exception {
        assertNotNull(NativeLibrary.class.getResource(BUNDLED), "the jar/classes carry the library");
        String out = probe();
        assertTrue(out.contains("FROM " + BUNDLED), out);
        assertTrue(out.contains("VERSION 0."), out);
    }

    @Test
    void systemPropertyOverrides() throws Exception {
        String file = new File(NativeLibrary.class.getResource(BUNDLED).toURI()).getAbsolutePath();
        String out = probe("-D" + NativeLibrary.PATH_PROPERTY + "=" + file);
        assertTrue(out.contains("FROM " + file), out);
    }

    @Test
    void javaLibraryPathIsTried() throws Exception {
        String dir = new File(NativeLibrary.class.getResource(BUNDLED).toURI()).getParent();
        String out = probe("-Djava.library.path=" + dir);
        assertTrue(out.contains("FROM java.library.path"), out);
    }

    @Test
    void platformName() {
        assertEquals("linux-x86_64", NativeLibrary.platform());
    }
}
