package io.etcdlock;

/**
 * Child JVM for {@link NativeLibraryTest}: loads the library and prints where it came from;
 * with the argument {@code hold}, then prints {@code READY} and waits for stdin to close (the
 * test kills it with SIGKILL meanwhile).
 */
public final class LoaderProbe {
    public static void main(String[] args) throws Exception {
        NativeBridge.ensureLoaded();
        System.out.println("FROM " + NativeLibrary.loadedFrom());
        System.out.println("VERSION " + NativeBridge.version());
        if (args.length > 0 && args[0].equals("hold")) {
            System.out.println("READY");
            System.out.flush();
            while (System.in.read() >= 0) {
                // wait
            }
        }
    }
}
