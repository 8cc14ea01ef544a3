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
 * {@code --toolchains}). {@code -Detcdlock.jdk21=<home>} still names one directly.
 */
final class Toolchains {
    private Toolchains() {}

    /** The home of a JDK whose toolchain version is at least {@code major}, if one is declared. */
    static Optional<String> jdk(int major) throws Exception {
        String given = System.getProperty("etcdlock.jdk21", "");
        if (!given.isEmpty()) {
            return Optional.of(given);
        }
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
