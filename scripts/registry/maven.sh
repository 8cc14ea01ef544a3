#!/usr/bin/env bash
# The Maven side of a release, against a real HTTP Maven repository on
# 127.0.0.1 (nginx with WebDAV: GET for everyone, PUT/MKCOL/DELETE behind basic
# auth, as a repository manager takes deploys). The subcommands the other
# ecosystems' scripts share (scripts/release.sh and scripts/cleanroom.sh drive
# them), plus `sign`, which scripts/dist_java.sh runs on what it deployed:
#
#   scripts/registry/maven.sh sign    DIST   # .asc (and its .md5/.sha1) beside every file of DIST/maven:
#                                            # with $ETCDLOCK_GPG_KEY (a key in the caller's GNUPGHOME,
#                                            # the project key of a real release; passphrase in
#                                            # $ETCDLOCK_GPG_PASSPHRASE) or else a throwaway key made in a
#                                            # temp GNUPGHOME; the public key goes to DIST/maven-signing-key.asc
#   scripts/registry/maven.sh start   STATE  # nginx on a free port, data in STATE/maven/; writes
#                                            # STATE/maven.env (MAVEN_REPO_URL, _ID, _USER, _PASSWORD,
#                                            # MAVEN_SETTINGS) and STATE/maven.pid
#   scripts/registry/maven.sh check   DIST   # Maven Central's rules on DIST/maven (maven_rules.py):
#                                            # POM metadata, parent published, no repositories, no
#                                            # SNAPSHOT, sources and Javadoc jars, checksums, signatures
#                                            # verified against DIST/maven-signing-key.asc
#                                            # (or $ETCDLOCK_MAVEN_SIGNING_KEY)
#   scripts/registry/maven.sh publish DIST STATE  # mvn deploy:deploy-file of each artifact (POM, jar,
#                                            # sources, javadoc, tests jar, every .asc) with the
#                                            # credentials of STATE/maven/settings.xml
#   scripts/registry/maven.sh install STATE ENDPOINTS  # a fresh Maven project (the BOM, etcdlock and
#                                            # etcdlock-spring, a <repository> naming the local one, a
#                                            # fresh local repository) on a PATH with no cargo, rustc,
#                                            # protoc or C compiler: resolves, compiles and runs a Main
#                                            # that locks, writes guarded, reads back and unlocks against
#                                            # ENDPOINTS; the signatures of what Maven downloaded verify
#   scripts/registry/maven.sh stop    STATE  # stops nginx; nothing left running
#
# scripts/registry/maven_rules_test.sh DIST shows the check failing on one defect at a time.
#
# Env: CARGO_TARGET_DIR (defaults to target/): nothing is cached there (nginx
# and gnupg come from apt), MAVEN_LOCAL_SEED (a local repository to pre-seed the
# clean room's from, hard-linked; default ~/.m2/repository; "none": download all).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' "$ROOT/Cargo.toml")
GROUP_PATH=io/etcdlock
# What a release publishes (scripts/dist_java.sh deploys these and their parent).
ARTIFACTS=(etcdlock-parent etcdlock-bom etcdlock etcdlock-spring etcdlock-test etcdlock-shedlock etcdlock-reactor etcdlock-kotlin)
DEPLOY_PLUGIN_VERSION=3.1.1   # maven-deploy-plugin, as bindings-java/pom.xml pins it

die() { echo "registry/maven: $*" >&2; exit 1; }
sudo_() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
# DIST is a dist directory (DIST/maven) or a repository root itself.
repo_of() { if [ -d "$1/maven/$GROUP_PATH" ]; then echo "$1/maven"; elif [ -d "$1/$GROUP_PATH" ]; then echo "$1"; else die "no Maven repository in $1 (want $1/maven/$GROUP_PATH)"; fi; }
key_of() { # the public key the signatures of DIST verify against
  local d=$1; [ -d "$d/maven" ] || d=$(dirname "$d")
  echo "${ETCDLOCK_MAVEN_SIGNING_KEY:-$d/maven-signing-key.asc}"
}
need_apt() { # package: install it with apt-get when its command is missing
  sudo_ apt-get update -qq && DEBIAN_FRONTEND=noninteractive sudo_ apt-get install -y -qq "$@" >/dev/null
}

cmd_sign() {
  local dist=$1 repo key pass=() n=0 what=key
  repo=$(repo_of "$dist")
  command -v gpg >/dev/null || need_apt gnupg
  if [ -n "${ETCDLOCK_GPG_KEY:-}" ]; then
    key=$ETCDLOCK_GPG_KEY
    if [ -n "${ETCDLOCK_GPG_PASSPHRASE:-}" ]; then   # (in a file of our own, not on a command line)
      SIGN_TMP=$(mktemp -d); trap 'rm -rf "$SIGN_TMP"' EXIT
      (umask 077; printf '%s' "$ETCDLOCK_GPG_PASSPHRASE" >"$SIGN_TMP/pass")
      pass=(--pinentry-mode loopback --passphrase-file "$SIGN_TMP/pass")
    fi
  else
    # The local release's stand-in for the project key: made here, used once, thrown away.
    GNUPGHOME=$(mktemp -d); export GNUPGHOME; what="a throwaway key"
    trap 'gpgconf --homedir "$GNUPGHOME" --kill all 2>/dev/null || true; rm -rf "$GNUPGHOME"' EXIT
    gpg --batch -q --passphrase '' --quick-gen-key "etcdlock local release (throwaway key) <release@etcdlock.invalid>" rsa3072 sign 2d 2>/dev/null
    key=$(gpg --batch -q --with-colons --list-secret-keys 2>/dev/null | awk -F: '/^fpr/ {print $10; exit}')
    pass=(--pinentry-mode loopback --passphrase '')
  fi
  while IFS= read -r -d '' f; do
    gpg --batch -q --yes "${pass[@]}" -u "$key" --armor --detach-sign -o "$f.asc" "$f"
    md5sum "$f.asc" | cut -d' ' -f1 >"$f.asc.md5"
    sha1sum "$f.asc" | cut -d' ' -f1 >"$f.asc.sha1"
    n=$((n + 1))
  done < <(find "$repo" -type f ! -name '*.md5' ! -name '*.sha1' ! -name '*.sha256' ! -name '*.sha512' \
    ! -name '*.asc' ! -name 'maven-metadata*' -print0)
  local pub; pub=$(key_of "$dist")
  gpg --batch -q --armor --export "$key" >"$pub" 2>/dev/null
  echo "  signed $n files with $what $key; public key: $pub"
}

cmd_check() {
  local dist=$1 repo key expect
  repo=$(repo_of "$dist"); key=$(key_of "$dist")
  command -v gpgv >/dev/null || need_apt gpgv
  [ -s "$key" ] || { echo "  FAIL no public key at $key to verify the signatures with (scripts/registry/maven.sh sign makes it)"; return 1; }
  expect=$(IFS=,; echo "${ARTIFACTS[*]}")
  python3 "$ROOT/scripts/registry/maven_rules.py" "$repo" --key "$key" --expect "$expect"
}

cmd_start() {
  local state=$1 dir port user pass hash
  dir=$state/maven
  if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then need_apt nginx-light; fi
  local nginx; nginx=$(command -v nginx || echo /usr/sbin/nginx)
  "$nginx" -V 2>&1 | grep -q -- --with-http_dav_module || die "$nginx has no http_dav_module"
  mkdir -p "$dir/repo" "$dir/logs" "$dir/tmp"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  user=deployer
  pass=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
  hash=$(openssl passwd -6 "$pass")
  echo "$user:$hash" >"$dir/htpasswd"
  cat >"$dir/nginx.conf" <<CONF
# The local Maven repository (scripts/registry/maven.sh start): reads open,
# deploys (PUT, MKCOL, DELETE) behind basic auth.
$([ "$(id -u)" -eq 0 ] && echo "user root;")
worker_processes 1;
daemon on;
pid $dir/nginx.pid;
error_log $dir/logs/error.log;
events { worker_connections 64; }
http {
  access_log $dir/logs/access.log;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  types { application/java-archive jar; text/xml pom xml; text/plain md5 sha1 sha256 sha512 asc; }
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$port;
    root $dir/repo;
    client_max_body_size 512m;
    location / {
      autoindex on;
      dav_methods PUT MKCOL DELETE;
      create_full_put_path on;
      dav_access user:rw group:r all:r;
      limit_except GET HEAD {
        auth_basic "etcdlock local Maven repository";
        auth_basic_user_file $dir/htpasswd;
      }
    }
  }
}
CONF
  "$nginx" -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log" || die "nginx did not start: $(tail -5 "$dir/logs/error.log")"
  local i
  for i in $(seq 100); do
    curl -fsS --max-time 5 -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break
    [ "$i" -lt 100 ] || die "nginx does not answer on 127.0.0.1:$port"
    sleep 0.1
  done
  cat "$dir/nginx.pid" >"$state/maven.pid"
  cat >"$dir/settings.xml" <<XML
<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <servers>
    <server><id>etcdlock-local</id><username>$user</username><password>$pass</password></server>
  </servers>
</settings>
XML
  cat >"$state/maven.env" <<ENV
export MAVEN_REPO_URL=http://127.0.0.1:$port/
export MAVEN_REPO_ID=etcdlock-local
export MAVEN_REPO_USER=$user
export MAVEN_REPO_PASSWORD=$pass
export MAVEN_SETTINGS=$dir/settings.xml
ENV
  echo "  maven repository at http://127.0.0.1:$port/ (nginx $(cat "$state/maven.pid"), WebDAV, deploys as $user)"
}

# One deploy-file execution for one artifact directory: the POM (the artifact
# of a pom module), the jar, -sources and -javadoc, other classified jars, and
# every .asc as an attached artifact of type <ext>.asc (Central's layout).
deploy_execution() {
  local d=$1 a=$2 base="$1/$2-$version" files=() cls=() types=() f rest
  echo "<execution><id>$a</id><phase>validate</phase><goals><goal>deploy-file</goal></goals><configuration>"
  if [ -f "$base.jar" ]; then
    echo "<file>$base.jar</file><packaging>jar</packaging>"
    [ -f "$base-sources.jar" ] && echo "<sources>$base-sources.jar</sources>"
    [ -f "$base-javadoc.jar" ] && echo "<javadoc>$base-javadoc.jar</javadoc>"
  else
    echo "<file>$base.pom</file><packaging>pom</packaging>"
  fi
  echo "<pomFile>$base.pom</pomFile>"
  for f in "$d"/"$a-$version"*; do
    case "$f" in *.md5|*.sha1|*.sha256|*.sha512) continue ;; esac
    rest=${f#"$base"}                   # "", "-sources.jar", ".pom.asc", "-tests.jar.asc", ...
    case "$rest" in .jar|.pom|-sources.jar|-javadoc.jar) continue ;; esac
    c=${rest%%.*}; files+=("$f"); cls+=("${c#-}"); types+=("${rest#*.}")
  done
  if [ "${#files[@]}" -gt 0 ]; then
    # (a signature alone has the empty classifier, which an empty <classifiers/>
    # cannot say: it is left to -Dclassifiers= on the command line)
    local c_list; c_list=$(IFS=,; echo "${cls[*]}")
    (IFS=,; echo "<files>${files[*]}</files>${c_list:+<classifiers>$c_list</classifiers>}<types>${types[*]}</types>")
  fi
  echo "</configuration></execution>"
}

cmd_publish() {
  local dist=$1 state=$2 repo a d log proj
  repo=$(repo_of "$dist")
  # shellcheck source=/dev/null
  source "$state/maven.env"
  log=$state/maven/publish.log
  # What `mvn deploy:deploy-file -Dfile=... -DpomFile=... -Dsources=... -Djavadoc=...
  # -Dfiles=... -Dclassifiers=... -Dtypes=...` does for each artifact, as the
  # executions of one Maven run (one JVM start, not eight).
  proj=$state/maven/publish; mkdir -p "$proj"
  {
    echo '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
    echo "<groupId>local</groupId><artifactId>publish-etcdlock</artifactId><version>$version</version><packaging>pom</packaging>"
    echo "<build><plugins><plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-deploy-plugin</artifactId><version>$DEPLOY_PLUGIN_VERSION</version>"
    echo "<configuration><url>$MAVEN_REPO_URL</url><repositoryId>$MAVEN_REPO_ID</repositoryId><generatePom>false</generatePom><retryFailedDeploymentCount>2</retryFailedDeploymentCount></configuration><executions>"
    for a in "${ARTIFACTS[@]}"; do
      d=$repo/$GROUP_PATH/$a/$version
      [ -d "$d" ] || die "$d missing"
      deploy_execution "$d" "$a"
    done
    echo "</executions></plugin></plugins></build></project>"
  } >"$proj/pom.xml"
  if ! (cd "$proj" && mvn -B -s "$MAVEN_SETTINGS" -Dclassifiers= validate >"$log" 2>&1); then
    echo "  FAIL mvn deploy:deploy-file to $MAVEN_REPO_URL"; grep -E 'ERROR|FAIL' "$log" | head -20; return 1
  fi
  cp "$(key_of "$dist")" "$state/maven/signing-key.asc"
  echo "  ok   mvn deploy:deploy-file: $(grep -c 'maven-deploy-plugin:.*:deploy-file' "$log") artifacts of $version to $MAVEN_REPO_URL" \
    "($(grep -c '^\[INFO\] Uploaded to' "$log") files uploaded, with credentials from $MAVEN_SETTINGS)"
}

cmd_install() {
  local state=$1 ep=$2 dir app m2 fail=0 out seed
  # shellcheck source=/dev/null
  source "$state/maven.env"
  dir=$state/maven/install; rm -rf "$dir"; mkdir -p "$dir"
  ok() { echo "  ok   $*"; }
  bad() { echo "  FAIL $*"; fail=1; }
  # The clean PATH (scripts/cleanpath.sh, as the clean room makes it): NOCC
  # has no compilers, cargo, rustc or protoc.
  # shellcheck source=scripts/cleanpath.sh
  source "$ROOT/scripts/cleanpath.sh"
  cleanpath "$dir" || die "no clean PATH"
  # A fresh local repository: plugins and third-party libraries hard-linked from
  # ~/.m2 (a user's Maven would fetch them from Central; MAVEN_LOCAL_SEED=none
  # does), io/etcdlock left out so it can only come from the local registry.
  m2=$dir/m2; seed=${MAVEN_LOCAL_SEED:-$HOME/.m2/repository}
  if [ "$seed" != none ] && [ -d "$seed" ]; then cp -al "$seed" "$m2" 2>/dev/null || cp -a "$seed" "$m2"; fi
  mkdir -p "$m2"; rm -rf "$m2/io/etcdlock"
  app=$dir/app; mkdir -p "$app/src/main/java/demo"
  cat >"$app/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId><artifactId>registry-maven</artifactId><version>1</version>
  <properties><maven.compiler.release>11</maven.compiler.release><project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>
  <repositories>
    <repository>
      <id>etcdlock-local</id><url>$MAVEN_REPO_URL</url>
      <releases><checksumPolicy>fail</checksumPolicy></releases><snapshots><enabled>false</enabled></snapshots>
    </repository>
  </repositories>
  <dependencyManagement><dependencies><dependency><groupId>io.etcdlock</groupId><artifactId>etcdlock-bom</artifactId><version>$version</version><type>pom</type><scope>import</scope></dependency></dependencies></dependencyManagement>
  <dependencies>
    <dependency><groupId>io.etcdlock</groupId><artifactId>etcdlock</artifactId></dependency>
    <dependency><groupId>io.etcdlock</groupId><artifactId>etcdlock-spring</artifactId></dependency>
  </dependencies>
  <build><plugins><plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.11.0</version></plugin></plugins></build>
</project>
POM
  cat >"$app/src/main/java/demo/Main.java" <<'JAVA'
package demo;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;
import java.time.Duration;
public class Main {
  public static void main(String[] args) {
    long token;
    try (EtcdLockClient client = EtcdLockClient.builder().endpoints(args[0].split(",")).ttl(Duration.ofSeconds(10)).build()) {
      LockGuard guard = client.newLock("registry-maven").acquire(Duration.ofSeconds(10));
      token = guard.fencingToken();
      guard.put("registry/maven", Long.toString(token));
      if (!Long.toString(token).equals(guard.get("registry/maven"))) throw new IllegalStateException("guarded get mismatch");
      guard.unlock();
      LockGuard again = client.newLock("registry-maven").tryAcquire().orElseThrow(() -> new IllegalStateException("unlock did not release"));
      again.unlock();
    }
    System.out.println("ok " + token);
  }
}
JAVA
  # An empty settings file: no mirror or credentials of the machine's ~/.m2/settings.xml.
  echo '<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0"/>' >"$dir/settings.xml"
  echo "== Maven: a fresh project, <repository> $MAVEN_REPO_URL, the BOM, etcdlock and etcdlock-spring (no cargo, rustc, protoc, cc)"
  if (cd "$app" && PATH=$NOCC mvn -B -q -s "$dir/settings.xml" -Dmaven.repo.local="$m2" package dependency:build-classpath \
        -Dmdep.outputFile=cp.txt >"$dir/mvn.log" 2>&1) &&
    grep -q "$m2/io/etcdlock/etcdlock/$version/etcdlock-$version.jar" "$app/cp.txt" &&
    grep -q "$m2/io/etcdlock/etcdlock-spring/$version/etcdlock-spring-$version.jar" "$app/cp.txt"; then
    ok "mvn package: io.etcdlock:etcdlock and etcdlock-spring $version (and the BOM and parent POMs) resolved from $MAVEN_REPO_URL"
  else
    bad "mvn package"; tail -30 "$dir/mvn.log"
  fi
  # Where Maven says each io.etcdlock file came from: the local registry, by its id.
  local remote
  remote=$(find "$m2/io/etcdlock" -name _remote.repositories -exec cat {} + 2>/dev/null | grep -c '>etcdlock-local=' || true)
  if [ "$remote" -ge 4 ] && ! find "$m2/io/etcdlock" -name _remote.repositories -exec cat {} + | grep -v '^#' | grep -qv '>etcdlock-local='; then
    ok "every io.etcdlock file in the fresh local repository came from etcdlock-local ($remote entries)"
  else
    bad "io.etcdlock files not from etcdlock-local: $(find "$m2/io/etcdlock" -name _remote.repositories -exec cat {} + 2>/dev/null | grep -v '^#' | tr '\n' ' ')"
  fi
  # The signatures: every file Maven downloaded verifies against the .asc the
  # registry serves, with the key that signed the release (and no other).
  local ring=$dir/key.gpg n=0 f rel sigbad=""
  export GNUPGHOME=$dir/gnupg; mkdir -m 700 -p "$GNUPGHOME"   # (not ~/.gnupg)
  gpg --batch -q --dearmor <"$state/maven/signing-key.asc" >"$ring"
  # (what the project needs: the two jars and POMs, the parent POM and the BOM; and anything else Maven fetched)
  local want=(etcdlock/$version/etcdlock-$version.jar etcdlock/$version/etcdlock-$version.pom
    etcdlock-spring/$version/etcdlock-spring-$version.jar etcdlock-spring/$version/etcdlock-spring-$version.pom
    etcdlock-parent/$version/etcdlock-parent-$version.pom etcdlock-bom/$version/etcdlock-bom-$version.pom)
  for f in "${want[@]}"; do [ -f "$m2/$GROUP_PATH/$f" ] || sigbad="$sigbad $GROUP_PATH/$f(not downloaded)"; done
  while IFS= read -r -d '' f; do
    rel=${f#"$m2"/}
    if curl -fsS --max-time 60 -o "$f.asc.dl" "$MAVEN_REPO_URL$rel.asc" && gpgv -q --keyring "$ring" "$f.asc.dl" "$f" 2>/dev/null; then
      n=$((n + 1))
    else
      sigbad="$sigbad $rel"
    fi
  done < <(find "$m2/io/etcdlock" -type f \( -name '*.jar' -o -name '*.pom' \) -print0)
  if [ -z "$sigbad" ]; then
    ok "gpg: the $n jars and POMs Maven downloaded verify against their .asc (key $(gpg --batch --with-colons --show-keys "$state/maven/signing-key.asc" 2>/dev/null | awk -F: '/^fpr/ {print $10; exit}'))"
  else
    bad "gpg: files not downloaded or whose signature does not verify:$sigbad"
  fi
  if out=$(cd "$app" && PATH=$NOCC java -cp "target/classes:$(cat cp.txt)" demo.Main "$ep" 2>"$dir/java.log") &&
    [ "${out#ok }" -gt 0 ] 2>/dev/null; then
    ok "java (clean PATH): lock, guarded put and get, unlock, try-lock against $ep: fencing token ${out#ok }"
  else
    bad "java: ${out:-} $(tail -5 "$dir/java.log")"
  fi
  [ "$fail" -eq 0 ]
}

cmd_stop() {
  local state=$1 pid
  [ -f "$state/maven.pid" ] || return 0
  pid=$(cat "$state/maven.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"   # (fast shutdown: nothing is being served any more)
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  fi
  rm -f "$state/maven.pid"
  echo "  maven repository stopped (nginx $pid)"
}

sub=${1:-}; shift || true
case "$sub" in
  sign) [ $# -eq 1 ] || die "usage: $0 sign DIST"; cmd_sign "$1" ;;
  start) [ $# -eq 1 ] || die "usage: $0 start STATE"; cmd_start "$(realpath "$1")" ;;
  check) [ $# -eq 1 ] || die "usage: $0 check DIST"; cmd_check "$(realpath "$1")" ;;
  publish) [ $# -eq 2 ] || die "usage: $0 publish DIST STATE"; cmd_publish "$(realpath "$1")" "$(realpath "$2")" ;;
  install) [ $# -eq 2 ] || die "usage: $0 install STATE ENDPOINTS"; cmd_install "$(realpath "$1")" "$2" ;;
  stop) [ $# -eq 1 ] || die "usage: $0 stop STATE"; cmd_stop "$(realpath "$1")" ;;
  *) die "usage: $0 sign|start|check|publish|install|stop ..." ;;
esac
