package io.etcdlock;

/** Child JVM for {@link NativeLibraryTest}: loads the library and prints where it came from. */
public final class LoaderProbe {
    public static void main(String[] args) {
        NativeBridge.ensureLoaded();
        System.out.println("FROM " + NativeLibrary.loadedFrom());
        System.out.println("VERSION " + NativeBridge.version());
    }
}
