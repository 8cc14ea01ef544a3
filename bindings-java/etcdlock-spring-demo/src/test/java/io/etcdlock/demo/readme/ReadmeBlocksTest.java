package io.etcdlock.demo.readme;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every {@code ```java} block of bindings-java/README.md, compiled as written against the
 * published modules (etcdlock, etcdlock-spring, etcdlock-shedlock,
 * etcdlock-reactor) and Spring: one test per block,
 * named by its line. The README elides code with {@code ...}; here an elided statement becomes
 * {@code throw new UnsupportedOperationException()} and an elided block body is empty. Statement
 * blocks are compiled as a method body with the names they leave to the reader ({@code log},
 * {@code storage}, {@code data}, {@code client}, {@code transcode()}, ...) declared around them;
 * blocks that declare classes are compiled as files of their own.
 */
class ReadmeBlocksTest {
    private static final Path README = Path.of("..", "README.md");

    private static final String IMPORTS = String.join("\n",
            "import io.etcdlock.*;",
            "import io.etcdlock.spring.*;",
            "import io.etcdlock.shedlock.*;",
            "import java.time.Duration;",
            "import java.util.List;",
            "import java.util.Optional;",
            "import java.util.concurrent.CompletableFuture;",
            "import java.util.concurrent.ExecutorService;",
            "import java.util.concurrent.TimeUnit;",
            "import java.util.concurrent.locks.Lock;",
            "import java.util.concurrent.locks.ReadWriteLock;",
            "import static java.nio.charset.StandardCharsets.UTF_8;",
            "import org.springframework.context.annotation.Bean;",
            "import org.springframework.context.annotation.Configuration;",
            "import org.springframework.integration.support.locks.LockRegistry;",
            "import org.springframework.scheduling.annotation.EnableScheduling;",
            "import org.springframework.scheduling.annotation.Scheduled;",
            "import org.springframework.stereotype.Component;",
            "import org.springframework.stereotype.Service;",
            "import org.springframework.web.bind.annotation.GetMapping;",
            "import org.springframework.web.bind.annotation.RestController;",
            "import net.javacrumbs.shedlock.core.LockProvider;",
            "import net.javacrumbs.shedlock.spring.annotation.EnableSchedulerLock;",
            "import net.javacrumbs.shedlock.spring.annotation.SchedulerLock;",
            "");

    /** What statement blocks use without declaring it. */
    private static final String SCOPE = String.join("\n",
            "    interface Storage { void write(byte[] data, long fencingToken); }",
            "    org.slf4j.Logger log; Storage storage; byte[] data; ExecutorService myExecutor; EtcdLockClient client;",
            "    void transcode() {} void readConfig() {} void transfer(long token) {} void stopScheduling() {}",
            "");

    record Block(int line, String code) {}

    static List<Block> javaBlocks() throws IOException {
        List<String> lines = Files.readAllLines(README, StandardCharsets.UTF_8);
        List<Block> out = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            if (!lines.get(i).strip().equals("```java")) {
                continue;
            }
            int j = i + 1;
            StringBuilder code = new StringBuilder();
            while (!lines.get(j).strip().equals("```")) {
                code.append(lines.get(j)).append('\n');
                j++;
            }
            out.add(new Block(i + 1, code.toString()));
            i = j;
        }
        return out;
    }

    static String unelide(String code) {
        String s = code.replaceAll("(?m)^(\\s*)\\.\\.\\.\\s*$", "$1throw new UnsupportedOperationException();");
        return s.replaceAll("\\{\\s*\\.\\.\\.\\s*}", "{ }");
    }

    static String compile(String className, String source) {
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        JavaFileObject file = new SimpleJavaFileObject(
                java.net.URI.create("string:///" + className + ".java"), JavaFileObject.Kind.SOURCE) {
            @Override
            public CharSequence getCharContent(boolean ignoreEncodingErrors) {
                return source;
            }
        };
        StringWriter errors = new StringWriter();
        Path out;
        try {
            out = Files.createTempDirectory("readme-java");
        } catch (IOException e) {
            throw new AssertionError(e);
        }
        List<String> options = List.of("-proc:none", "-d", out.toString(), "-classpath", System.getProperty("java.class.path"));
        boolean ok = javac.getTask(errors, null, null, options, null, List.of(file)).call();
        return ok ? null : errors + "\n--- source ---\n" + source;
    }

    @TestFactory
    List<DynamicTest> everyJavaBlockCompiles() throws IOException {
        List<Block> blocks = javaBlocks();
        assertTrue(blocks.size() >= 4, "the README's java blocks: " + blocks.size());
        List<DynamicTest> tests = new ArrayList<>();
        for (Block b : blocks) {
            String first = b.code().strip().lines().findFirst().orElse("");
            tests.add(DynamicTest.dynamicTest("README.md:" + b.line() + " " + first, () -> {
                String code = unelide(b.code());
                boolean declaresClasses = Pattern.compile("(?m)^(@\\w+.*\\n)*class \\w+").matcher(code).find();
                String cls = "ReadmeBlock" + b.line();
                String source = declaresClasses
                        ? IMPORTS + code
                        : IMPORTS + "class " + cls + " {\n" + SCOPE + "    void example() throws Exception {\n" + code + "\n    }\n}\n";
                String errors = compile(cls, source);
                assertTrue(errors == null, () -> "README.md:" + b.line() + " does not compile:\n" + errors);
                System.out.println("compiled README.md:" + b.line() + " (" + (declaresClasses ? "classes" : "statements") + "): " + first);
            }));
        }
        return tests;
    }
}
