package io.etcdlock.demo.spring;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

import javax.xml.parsers.DocumentBuilderFactory;

import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/**
 * Finds a JDK of at least a given version the way Maven does: in the toolchains file
 * ({@code ~/.m2/toolchains.xml}, or the file named by {@code -Detcdlock.toolchains}, which
 * {@code bindings-java/test.sh} writes from the installed JDKs and also gives Maven with
 * {@code --toolchains}), then among the installed JDKs where maven-toolchains-plugin's JDK
 * discovery looks ({@code JAVA*_HOME} variables, {@code /usr/lib/jvm}, {@code /opt/java},
 * {@code ~/.sdkman/candidates/java}, {@code ~/.jdks}, each home's {@code release} file giving
 * its version), so a newcomer's plain {@code mvn verify} runs the test on an installed JDK 21+.
 * {@code -Detcdlock.jdk21=<home>} still names one directly.
 */
final class Toolchains {
    private Toolchains() {}

    /** The home of a JDK whose toolchain version is at least {@code major}, if one is declared. */
    static Optional<String> jdk(int major) throws Exception {
        String given = System.getProperty("etcdlock.jdk21", "");
        if (!given.isEmpty()) {
            return Optional.of(given);
        }
        Optional<String> declared = declared(major);
        return declared.isPresent() ? declared : installed(major);
    }

    /** A JDK of at least {@code major} among those installed in the usual places. */
    static Optional<String> installed(int major) throws Exception {
        java.util.List<Path> homes = new java.util.ArrayList<>();
        for (java.util.Map.Entry<String, String> e : System.getenv().entrySet()) {
            if (e.getKey().startsWith("JAVA") && e.getKey().endsWith("_HOME")) {
                homes.add(Path.of(e.getValue()));
            }
        }
        String home = System.getProperty("user.home");
        for (Path dir : new Path[] {Path.of("/usr/lib/jvm"), Path.of("/opt/java"),
                Path.of(home, ".sdkman", "candidates", "java"), Path.of(home, ".jdks")}) {
            if (Files.isDirectory(dir)) {
                try (java.util.stream.Stream<Path> s = Files.list(dir)) {
                    s.sorted().forEach(homes::add);
                }
            }
        }
        for (Path h : homes) {
            Path release = h.resolve("release");
            if (!Files.isReadable(release) || !Files.isExecutable(h.resolve("bin").resolve("java"))) {
                continue;
            }
            for (String line : Files.readAllLines(release)) {
                if (line.startsWith("JAVA_VERSION=")) {
                    String digits = line.substring(13).replace("\"", "").replaceFirst("^1\\.", "")
                            .replaceFirst("[^0-9].*$", "");
                    if (!digits.isEmpty() && Integer.parseInt(digits) >= major) {
                        return Optional.of(h.toString());
                    }
                }
            }
        }
        return Optional.empty();
    }

    /** A JDK of at least {@code major} declared in the toolchains file. */
    static Optional<String> declared(int major) throws Exception {
        String file = System.getProperty("etcdlock.toolchains", "");
        Path path = file.isEmpty() ? Path.of(System.getProperty("user.home"), ".m2", "toolchains.xml") : Path.of(file);
        if (!Files.isReadable(path)) {
            return Optional.empty();
        }
        DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
        f.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
        NodeList chains = f.newDocumentBuilder().parse(path.toFile()).getElementsByTagName("toolchain");
        for (int i = 0; i < chains.getLength(); i++) {
            Element tc = (Element) chains.item(i);
            String type = text(tc, "type");
            String version = text(tc, "version");
            String home = text(tc, "jdkHome");
            if (!"jdk".equals(type) || version == null || home == null) {
                continue;
            }
            String digits = version.replaceFirst("^1\\.", "").replaceFirst("[^0-9].*$", "");
            if (!digits.isEmpty() && Integer.parseInt(digits) >= major
                    && new File(home, "bin" + File.separator + "java").canExecute()) {
                return Optional.of(home);
            }
        }
        return Optional.empty();
    }

    private static String text(Element e, String tag) {
        NodeList l = e.getElementsByTagName(tag);
        return l.getLength() == 0 ? null : l.item(0).getTextContent().trim();
    }
}
