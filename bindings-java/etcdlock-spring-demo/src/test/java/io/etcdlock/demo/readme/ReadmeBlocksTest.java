package io.etcdlock.demo.readme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.platform.engine.discovery.DiscoverySelectors;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

import io.etcdlock.demo.DemoEtcd;

/**
 * Every {@code ```java} block of bindings-java/README.md and of every page of the documentation
 * site (docs/**&#47;*.md), compiled against the published modules (etcdlock, etcdlock-spring, etcdlock-test,
 * etcdlock-shedlock, etcdlock-reactor) and Spring: one test per block, named by its page and
 * line ({@code docs/start/java.md:42 ...}).
 *
 * <ul>
 *   <li>A block with a {@code static void main} is a program: it is compiled as written (no
 *       imports added, so it is complete) and run against a throw-away etcd, as a copy whose
 *       {@code .endpoints("http://127.0.0.1:2379")} is the test's endpoints plus a namespace of its
 *       own (a program on the in-process store, {@code mem://NAME}, runs as written).
 *       When a {@code ```text} block follows it (after a line such as "Prints:"), the program
 *       must print exactly that. A block marked {@code <!-- fragment -->} on the line before its
 *       fence is only compiled.</li>
 *   <li>A block with JUnit tests ({@code @Test}) and no {@code main} is a test file, as a user's
 *       test: it is compiled as written and its test class (the last top-level {@code class X} before
 *       its first {@code @Test}) is run by the JUnit Platform launcher; every test must pass. The
 *       tests bring their store ({@code mem://}, through the etcdlock-test module) or Spring
 *       context with them.</li>
 *   <li>Any other block is a fragment and must be marked so (compiled, not run). Fragments elide
 *       code with {@code ...}: an elided statement becomes
 *       {@code throw new UnsupportedOperationException()} and an elided block body is empty.
 *       Statement blocks are compiled as a method body with the names they leave to the reader
 *       ({@code log}, {@code storage}, {@code data}, {@code client}, {@code transcode()}, ...)
 *       declared around them; blocks that declare classes are compiled as files of their own.</li>
 *   <li>A block marked {@code <!-- example: PATH -->} is an excerpt of PATH, a file another test
 *       compiles and runs ({@code scripts/readme_blocks.py} checks that it is one): skipped here.</li>
 * </ul>
 */
class ReadmeBlocksTest {
    /** The module runs in bindings-java/etcdlock-spring-demo. */
    private static final Path ROOT = Path.of("..", "..");
    private static final Path README = Path.of("bindings-java", "README.md");
    private static final Path DOCS = Path.of("docs");
    private static final String PLACEHOLDER_ENDPOINT = "\"http://127.0.0.1:2379\"";

    private static final String IMPORTS = String.join("\n",
            "import io.etcdlock.*;",
            "import io.etcdlock.spring.*;",
            "import io.etcdlock.shedlock.*;",
            "import io.etcdlock.test.*;",
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
            "    void startScheduling() {} void runReport() {} void sendInvoices() {}",
            "");

    private static final Pattern FENCE = Pattern.compile("^```(\\S*)\\s*$");
    private static final Pattern MAIN = Pattern.compile("static\\s+void\\s+main\\s*\\(");
    private static final Pattern TEST = Pattern.compile("(?m)^\\s*@Test\\b");

    /** A fenced block: its page (relative to the repository), line, code, fragment mark and the output it says it prints. */
    record Block(String page, int line, String code, boolean fragment, String prints) {
        String id() {
            return page + ":" + line;
        }
    }

    static DemoEtcd etcd;

    @BeforeAll
    static void start() throws Exception {
        etcd = DemoEtcd.start();
    }

    @AfterAll
    static void stop() throws Exception {
        if (etcd != null) {
            etcd.close();
        }
    }

    /** bindings-java/README.md, then every docs/**.md page in path order. */
    static List<Path> pages() throws IOException {
        List<Path> out = new ArrayList<>();
        out.add(README);
        try (Stream<Path> s = Files.walk(ROOT.resolve(DOCS))) {
            s.filter(p -> p.toString().endsWith(".md"))
                    .map(p -> ROOT.relativize(p))
                    .sorted()
                    .forEach(out::add);
        }
        return out;
    }

    /** The blocks of one language on one page, each with the ```text block that follows it, if any. */
    static List<Block> blocks(Path page, String lang) throws IOException {
        List<String> lines = Files.readAllLines(ROOT.resolve(page), StandardCharsets.UTF_8);
        List<Block> out = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            Matcher m = FENCE.matcher(lines.get(i));
            if (!m.matches() || m.group(1).isEmpty()) {
                continue;
            }
            int j = i + 1;
            StringBuilder code = new StringBuilder();
            while (j < lines.size() && !lines.get(j).strip().equals("```")) {
                code.append(lines.get(j)).append('\n');
                j++;
            }
            // <!-- example: PATH -->: an excerpt of a file another test runs (scripts/readme_blocks.py checks it).
            boolean excerpt = i > 0 && lines.get(i - 1).strip().startsWith("<!-- example:");
            if (m.group(1).equals(lang) && !excerpt) {
                boolean fragment = i > 0 && lines.get(i - 1).strip().equals("<!-- fragment -->");
                out.add(new Block(page.toString().replace('\\', '/'), i + 1, code.toString(), fragment, prints(lines, j + 1)));
            }
            i = j;
        }
        return out;
    }

    /**
     * The ```text block right after line {@code from} (only blank lines and one short paragraph
     * saying "Prints" between them), or null.
     */
    static String prints(List<String> lines, int from) {
        int k = from;
        boolean said = false;
        while (k < lines.size() && !lines.get(k).startsWith("```")) {
            String l = lines.get(k).strip();
            if (l.startsWith("#")) {
                return null;
            }
            if (!l.isEmpty()) {
                if (!l.toLowerCase(java.util.Locale.ROOT).contains("prints") && !said) {
                    return null;
                }
                said = true;
            }
            k++;
        }
        if (!said || k >= lines.size() || !lines.get(k).strip().equals("```text")) {
            return null;
        }
        StringBuilder out = new StringBuilder();
        for (k++; k < lines.size() && !lines.get(k).strip().equals("```"); k++) {
            out.append(lines.get(k)).append('\n');
        }
        return out.toString();
    }

    static String unelide(String code) {
        String s = code.replaceAll("(?m)^(\\s*)\\.\\.\\.\\s*$", "$1throw new UnsupportedOperationException();");
        return s.replaceAll("\\{\\s*\\.\\.\\.\\s*}", "{ }");
    }

    /** Compiles one source file into a new folder: the folder, or an AssertionError with javac's messages. */
    static Path compile(String id, String className, String source) throws IOException {
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        JavaFileObject file = new SimpleJavaFileObject(
                java.net.URI.create("string:///" + className + ".java"), JavaFileObject.Kind.SOURCE) {
            @Override
            public CharSequence getCharContent(boolean ignoreEncodingErrors) {
                return source;
            }
        };
        StringWriter errors = new StringWriter();
        Path out = Files.createTempDirectory("readme-java");
        List<String> options = List.of("-proc:none", "-d", out.toString(), "-classpath", System.getProperty("java.class.path"));
        boolean ok = javac.getTask(errors, null, null, options, null, List.of(file)).call();
        if (!ok) {
            throw new AssertionError(id + " does not compile:\n" + errors + "\n--- source ---\n" + source);
        }
        return out;
    }

    /** The class that declares {@code main}: the last {@code class X} before it. */
    static String mainClass(String code) {
        Matcher main = MAIN.matcher(code);
        assertTrue(main.find());
        Matcher cls = Pattern.compile("\\bclass\\s+(\\w+)").matcher(code.substring(0, main.start()));
        String name = null;
        while (cls.find()) {
            name = cls.group(1);
        }
        assertTrue(name != null, "no class before main");
        return name;
    }

    /** Runs a program block as a copy on the test's etcd: what it printed. */
    static String run(Block b) throws Exception {
        String ns = "docs-java-" + b.line() + "-" + System.nanoTime() + "/";
        String endpoints = etcd.endpoints().stream().map(e -> "\"" + e + "\"").collect(Collectors.joining(", "));
        assertTrue(b.code().contains(".endpoints(" + PLACEHOLDER_ENDPOINT + ")") || b.code().contains("\"mem://"),
                b.id() + ": a program connects with .endpoints(" + PLACEHOLDER_ENDPOINT + "), which the test replaces, or to mem://");
        String source = b.code().replace(".endpoints(" + PLACEHOLDER_ENDPOINT + ")",
                ".endpoints(" + endpoints + ").namespace(\"" + ns + "\")");
        String cls = mainClass(source);
        Path out = compile(b.id(), cls, source);
        PrintStream stdout = System.out;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        try (URLClassLoader loader = new URLClassLoader(new URL[] {out.toUri().toURL()}, ReadmeBlocksTest.class.getClassLoader())) {
            Method main = loader.loadClass(cls).getMethod("main", String[].class);
            main.setAccessible(true); // the class may be package-private, as `java File.java` allows
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            main.invoke(null, (Object) new String[0]);
        } catch (InvocationTargetException e) {
            throw new AssertionError(b.id() + " threw", e.getCause());
        } finally {
            System.setOut(stdout);
        }
        return printed.toString(StandardCharsets.UTF_8);
    }

    /**
     * Runs a test-file block: compiled as written, its test class run by the JUnit launcher; a
     * summary of what ran, or an AssertionError with every failure.
     */
    static String runTests(Block b) throws Exception {
        String code = b.code();
        Matcher test = TEST.matcher(code);
        assertTrue(test.find());
        // The last top-level class (not indented) before it: nested ones are its configuration.
        Matcher cls = Pattern.compile("(?m)^(?:public\\s+|final\\s+|abstract\\s+)*class\\s+(\\w+)")
                .matcher(code.substring(0, test.start()));
        String name = null;
        while (cls.find()) {
            name = cls.group(1);
        }
        assertTrue(name != null, b.id() + ": no top-level class before the first @Test");
        Path out = compile(b.id(), name, code);
        SummaryGeneratingListener listener = new SummaryGeneratingListener();
        ClassLoader before = Thread.currentThread().getContextClassLoader();
        try (URLClassLoader loader = new URLClassLoader(new URL[] {out.toUri().toURL()}, ReadmeBlocksTest.class.getClassLoader())) {
            Thread.currentThread().setContextClassLoader(loader);
            LauncherFactory.create().execute(LauncherDiscoveryRequestBuilder.request()
                    .selectors(DiscoverySelectors.selectClass(loader.loadClass(name))).build(), listener);
        } finally {
            Thread.currentThread().setContextClassLoader(before);
        }
        TestExecutionSummary s = listener.getSummary();
        StringBuilder failures = new StringBuilder();
        s.getFailures().forEach(f -> failures.append("\n  ").append(f.getTestIdentifier().getDisplayName())
                .append(": ").append(f.getException()));
        assertTrue(s.getTestsFoundCount() > 0, b.id() + ": no tests found in " + name);
        assertEquals(s.getTestsFoundCount(), s.getTestsSucceededCount(),
                b.id() + ": " + s.getTestsFailedCount() + " of " + s.getTestsFoundCount() + " tests failed" + failures);
        return s.getTestsSucceededCount() + " tests of " + name + " passed";
    }

    @TestFactory
    List<DynamicTest> everyJavaBlockCompilesAndEveryProgramRuns() throws IOException {
        List<Block> blocks = new ArrayList<>();
        for (Path page : pages()) {
            blocks.addAll(blocks(page, "java"));
        }
        assertTrue(blocks.stream().anyMatch(b -> b.page().startsWith("docs/")), "no java block in docs/");
        assertTrue(blocks.size() >= 10, "java blocks in the README and docs/: " + blocks.size());
        List<DynamicTest> tests = new ArrayList<>();
        for (Block b : blocks) {
            String first = b.code().strip().lines().findFirst().orElse("");
            tests.add(DynamicTest.dynamicTest(b.id() + " " + first, () -> {
                String code = b.code();
                if (TEST.matcher(code).find() && !MAIN.matcher(code).find() && !b.fragment()) {
                    System.out.println("ran " + b.id() + ": " + runTests(b));
                    return;
                }
                if (MAIN.matcher(code).find() && !b.fragment()) {
                    String printed = run(b);
                    if (b.prints() != null) {
                        assertEquals(b.prints(), printed, b.id() + " prints what its page says");
                    }
                    System.out.println("ran " + b.id() + ": " + first + (b.prints() != null ? " (printed what the page says)" : ""));
                    return;
                }
                assertTrue(b.fragment(), b.id() + ": a block without a main or tests is a fragment (compiled, not run):"
                        + " mark it <!-- fragment --> on the line before its fence");
                code = unelide(code);
                boolean declaresClasses = Pattern.compile("(?m)^(@\\w+.*\\n)*(public\\s+)?class \\w+").matcher(code).find();
                Matcher pub = Pattern.compile("(?m)^public\\s+class\\s+(\\w+)").matcher(code);
                String cls = pub.find() ? pub.group(1) : "DocBlock" + b.line();
                String source = declaresClasses
                        ? IMPORTS + code
                        : IMPORTS + "class " + cls + " {\n" + SCOPE + "    void example() throws Exception {\n" + code + "\n    }\n}\n";
                compile(b.id(), cls, source);
                System.out.println("compiled " + b.id() + " (fragment, " + (declaresClasses ? "classes" : "statements") + "): " + first);
            }));
        }
        return tests;
    }
}
