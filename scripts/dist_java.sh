# Sourced by scripts/dist.sh (in a background subshell: its output goes to a
# log that dist.sh prints before the macOS check), with dist.sh's functions
# and variables (OUT, work, version, ARCHES, EXTRA, SKIPPED, bin_of, xbin, require,
# glibc_check, musl_check, win_check, no_bench, tool, die): the Maven
# deploy of the published modules to the file repository dist/maven, signed
# (scripts/registry/maven.sh sign: dist/maven-signing-key.asc is the key).
# The pom copies CARGO_TARGET_DIR/release/ into native/linux-x86_64/ and each
# CARGO_TARGET_DIR/<target>/release/ into its platform folder (the folders
# NativeLibrary picks from os.name, os.arch and the C library).
j=$work/java
mkdir -p "$j" "$work/native/release"
tar -C bindings-java --exclude=./target --exclude='./*/target' -cf - . | tar -C "$j" -xf -
for a in "${ARCHES[@]}"; do
  so=$(bin_of "$a")/libetcdlock_jni.so
  require "$so" "the Maven jar ($a)"
  glibc_check "$a" "$so"
  no_bench "$so"
  if [ "$a" = x86_64 ]; then
    install -m 0755 "$so" "$work/native/release/libetcdlock_jni.so"
  else
    install -D -m 0755 "$so" "$work/native/$a-unknown-linux-gnu/release/libetcdlock_jni.so"
  fi
done
for T in "${EXTRA[@]}"; do
  case "$T" in
    *-windows-gnu) f=etcdlock_jni.dll ;;
    *-apple-darwin) f=libetcdlock_jni.dylib ;;
    *) f=libetcdlock_jni.so ;;
  esac
  so=$(xbin "$T")/$f
  require "$so" "the Maven jar ($T)"
  dst=$work/native/$T/release/$f
  install -D -m 0755 "$so" "$dst"
  case "$T" in
    *-linux-musl) "$(tool "${T%%-*}" strip)" --strip-all -R .debug_gdb_scripts "$dst"; musl_check "${T%%-*}" "$dst" ;;
    *-windows-gnu) x86_64-w64-mingw32-strip --strip-all "$dst"; win_check "$dst" ;;
    *-apple-darwin) ;;   # (inspected below, from the jar)
  esac
  no_bench "$dst"
done
# The checkout's poms say $version-SNAPSHOT between releases; the artifacts are $version.
find "$j" -name pom.xml -exec sed -i "s|<version>$version-SNAPSHOT</version>|<version>$version</version>|" {} +
(cd "$j" && mvn -B -q -Pdist deploy -pl etcdlock-bom,etcdlock,etcdlock-spring,etcdlock-test,etcdlock-shedlock,etcdlock-reactor,etcdlock-kotlin -am -DskipTests \
  -Dcargo.skip=true -Dcargo.target.dir="$work/native" -Detcdlock.dist.url="file://$OUT/maven") ||
  die "mvn deploy to $OUT/maven failed"
jar=$OUT/maven/io/etcdlock/etcdlock/$version/etcdlock-$version.jar
listing=$(unzip -l "$jar")   # (not piped into grep -q: pipefail would see unzip's SIGPIPE)
natives=(linux-x86_64/libetcdlock_jni.so linux-aarch64/libetcdlock_jni.so linux-x86_64-musl/libetcdlock_jni.so
  linux-aarch64-musl/libetcdlock_jni.so macos-aarch64/libetcdlock_jni.dylib windows-x86_64/etcdlock_jni.dll)
# (--fast leaves macOS x86_64 out: dist.sh's SKIPPED)
[[ " ${SKIPPED[*]} " == *" x86_64-apple-darwin "* ]] || natives+=(macos-x86_64/libetcdlock_jni.dylib)
for f in "${natives[@]}"; do
  grep -q "native/$f" <<<"$listing" || die "$jar carries no native/$f"
done
[ "$(grep -c 'native/.*etcdlock_jni' <<<"$listing")" = "${#natives[@]}" ] ||
  die "$jar carries $(grep -c 'native/.*etcdlock_jni' <<<"$listing") native libraries, not ${#natives[@]}"
echo "  $(basename "$jar"): ${#natives[@]} native libraries (${#natives[@]} platforms)"
srcjar=${jar%.jar}-sources.jar
! unzip -l "$srcjar" | grep -qE '\.(so|dylib|dll)$' || die "$srcjar carries a native library"
# Maven Central takes only signed files: a .asc beside every file of dist/maven,
# made with the project key when the release provides it (ETCDLOCK_GPG_KEY in
# GNUPGHOME), else with a throwaway key (the local release); the public key is
# dist/maven-signing-key.asc, which scripts/registry/maven.sh check verifies with.
bash scripts/registry/maven.sh sign "$OUT" || die "signing $OUT/maven failed"
