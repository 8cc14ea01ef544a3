#!/usr/bin/env bash
# What .github/workflows/release.yml does on a version tag, runnable here
# against local registries (the workflow calls the same subcommands, so the
# two cannot drift). The per-registry work is scripts/registry/<eco>.sh
# (eco: cargo pypi npm maven; subcommands start/check/publish/install/stop).
#
#   scripts/release.sh --local DIST STATE [--keep] [--only ECO,...]
#       For each eco: scripts/registry/<eco>.sh start STATE, check DIST,
#       publish DIST STATE (the commands a release uses, against the local
#       registry), then --assets DIST. The registries are stopped at the end
#       (and on any failure) unless --keep: then they stay up for
#       scripts/cleanroom.sh's installs (scripts/registry/<eco>.sh install
#       STATE ENDPOINTS), and it prints how to stop them. STATE is made if
#       missing; STATE/release.ecos lists the registries started.
#   scripts/release.sh --check DIST [--only ECO,...]
#       Each eco's own checks on DIST (twine check --strict, npm publish
#       --dry-run, Central's POM rules, cargo package --verify): release.yml's
#       gate before anything is published.
#   scripts/release.sh --assets DIST
#       The GitHub release's extras, written into DIST: SHA256SUMS (the C and
#       CLI archives, and every other artifact) and one CycloneDX SBOM per
#       artifact, DIST/sbom/<artifact>.cdx.json (scripts/sbom.py: the Rust
#       crates compiled into it, from Cargo.lock), each checked.
#   scripts/release.sh --stop STATE
#       Stop the registries --local --keep left running.
#   scripts/release.sh --tag-check TAG
#       TAG (v1.2.3) names the workspace's version (Cargo.toml
#       [workspace.package]); release.yml's first step.
#   scripts/release.sh --maven-central DIST [--dry-run]
#       The Maven artifacts of DIST/maven (as scripts/dist_java.sh deployed
#       and signed them and the clean room installed them) as one Central
#       Portal bundle: each file with its signature (dist's .asc, checked
#       against DIST/maven-signing-key.asc; one missing is made here with the
#       secret key in GNUPGHOME, MAVEN_GPG_KEY_ID picks it) and checksums,
#       uploaded to the Portal's publisher API with the token in
#       CENTRAL_TOKEN_USER / CENTRAL_TOKEN_PASS (publishingType AUTOMATIC).
#       --dry-run: a throwaway key for what is unsigned, every signature
#       verified, no upload.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
ECOS=(cargo pypi npm maven)
die() { echo "release.sh: $*" >&2; exit 1; }
say() { printf '[release %4ss] %s\n' "$SECONDS" "$*"; }
abspath() { mkdir -p "$1" && (cd "$1" && pwd); }
usage() { sed -n '2,38p' "$0"; exit 2; }

mode=${1:-}; shift || true
keep=0 only="" dry=0 args=()
while (($#)); do
  case "$1" in
    --keep) keep=1; shift ;;
    --only) only=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -*) usage ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ -n "$only" ]; then
  IFS=, read -r -a ECOS <<<"$only"
  for e in "${ECOS[@]}"; do case "$e" in cargo|pypi|npm|maven) ;; *) die "unknown eco $e (cargo pypi npm maven)" ;; esac; done
fi
eco_script() {
  local s=scripts/registry/$1.sh
  [ -f "$s" ] || die "$s is missing"
  echo "$s"
}

# --- SHA256SUMS and the SBOMs
assets() { # dist
  local dist=$1 n
  [ -d "$dist" ] || die "no $dist"
  say "SHA256SUMS and one SBOM per artifact in $dist"
  # Every file a release publishes: the GitHub release's archives, and the
  # packages the registries get (the sums are the same bytes either way).
  (cd "$dist" && find . -maxdepth 1 -type f \( -name '*.tar.gz' -o -name '*.zip' -o -name '*.whl' -o -name '*.tgz' -o -name '*.crate' \) \
      -printf '%f\n' | LC_ALL=C sort >"$dist/.assets")
  (cd "$dist" && find maven -type f \( -name '*.jar' -o -name '*.pom' \) 2>/dev/null | LC_ALL=C sort >>"$dist/.assets") || true
  n=$(wc -l <"$dist/.assets")
  [ "$n" -gt 0 ] || die "no artifacts in $dist"
  (cd "$dist" && xargs -d '\n' sha256sum <.assets >SHA256SUMS && sha256sum --quiet -c SHA256SUMS) ||
    die "SHA256SUMS does not verify"
  say "  SHA256SUMS: $n files, verified (sha256sum -c)"
  python3 scripts/sbom.py --out "$dist/sbom" --list "$dist/.assets" "$dist" | sed 's/^/  /'
  rm -f "$dist/.assets"
}

# --- the local release
local_release() { # dist state
  local dist state e s
  dist=$(abspath "$1"); state=$(abspath "$2")
  : >"$state/release.ecos"
  # On a failure the registries stop, --keep or not.
  STOP_STATE=$state
  trap 'stop_all "$STOP_STATE"' EXIT
  for e in "${ECOS[@]}"; do
    s=$(eco_script "$e")
    say "$e: start"
    # (listed before it starts: a start that fails half-way is stopped too)
    echo "$e" >>"$state/release.ecos"
    bash "$s" start "$state" || die "$e: start failed"
    say "$e: check $dist"
    bash "$s" check "$dist" || die "$e: its registry's checks failed"
    say "$e: publish to the local registry"
    bash "$s" publish "$dist" "$state" || die "$e: publish failed"
  done
  assets "$dist"
  say "released $(version) to the local registries: ${ECOS[*]}"
  if [ "$keep" = 1 ]; then
    trap - EXIT
    # (passwords and tokens, throwaway ones, by name only)
    for e in "${ECOS[@]}"; do
      [ -f "$state/$e.env" ] && sed -E -e 's/^(export [A-Z_]*(PASSWORD|TOKEN|SECRET)[A-Z_]*=).*/\1.../' -e "s/^/  $e: /" "$state/$e.env"
    done
    echo "  (source $state/<eco>.env for the values)"
    echo "registries left running; stop them with: scripts/release.sh --stop $state"
  fi
}
stop_all() { # state
  local state=$1 e rc=0
  [ -f "$state/release.ecos" ] || return 0
  # Last started, first stopped.
  for e in $(tac "$state/release.ecos"); do
    bash "scripts/registry/$e.sh" stop "$state" || { echo "release.sh: $e: stop failed" >&2; rc=1; }
  done
  rm -f "$state/release.ecos"
  return "$rc"
}

version() { sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' Cargo.toml; }

# --- Maven Central (the Central Portal's bundle upload)
# The signatures: the .asc files scripts/dist_java.sh had made beside each
# file (scripts/registry/maven.sh sign, with the project key when
# ETCDLOCK_GPG_KEY names one, as release.yml's build job does), checked
# against DIST/maven-signing-key.asc; a file without one is signed here with
# the secret key in GNUPGHOME (MAVEN_GPG_KEY_ID picks it, passphrase in
# MAVEN_GPG_PASSPHRASE), or with --dry-run a throwaway key.
maven_central() { # dist
  local dist work bundle f user pass v signed=0 reused=0
  dist=$(abspath "$1"); v=$(version)
  [ -d "$dist/maven/io/etcdlock" ] || die "no $dist/maven/io/etcdlock (scripts/dist.sh deploys it)"
  command -v gpg >/dev/null || die "gpg is missing"
  work=$(mktemp -d); MC_WORK=$work
  # (gpg-agents of the keyrings made here are stopped with them)
  trap 'GNUPGHOME=$MC_WORK/verify gpgconf --kill all 2>/dev/null; GNUPGHOME=$MC_WORK/gnupg gpgconf --kill all 2>/dev/null; rm -rf "$MC_WORK"' EXIT
  if [ "$dry" = 1 ]; then
    # A throwaway key in a throwaway keyring: the same signing and checks, no secret.
    export GNUPGHOME=$work/gnupg; mkdir -m 700 "$GNUPGHOME"
    gpg --batch --quiet --passphrase '' --quick-gen-key "etcdlock dry run <dry-run@invalid>" ed25519 sign never 2>/dev/null
  fi
  # The release's version only, without the file repository's maven-metadata.xml
  # (the Portal writes its own).
  (cd "$dist/maven" && find io/etcdlock -path "*/$v/*" -type f \( -name '*.jar' -o -name '*.pom' \)) | LC_ALL=C sort >"$work/files"
  [ -s "$work/files" ] || die "no $v artifacts under $dist/maven"
  mkdir "$work/bundle"
  while read -r f; do
    install -D -m 0644 "$dist/maven/$f" "$work/bundle/$f"
    if [ -f "$dist/maven/$f.asc" ]; then
      install -m 0644 "$dist/maven/$f.asc" "$work/bundle/$f.asc"; reused=$((reused + 1))
    else
      gpg --batch --list-secret-keys ${MAVEN_GPG_KEY_ID:+"$MAVEN_GPG_KEY_ID"} >/dev/null 2>&1 ||
        die "$f is not signed and there is no secret GPG key to sign it (release.yml imports MAVEN_GPG_PRIVATE_KEY)"
      gpg --batch --yes --quiet --armor --detach-sign ${MAVEN_GPG_KEY_ID:+--local-user "$MAVEN_GPG_KEY_ID"} \
        ${MAVEN_GPG_PASSPHRASE:+--pinentry-mode loopback --passphrase "$MAVEN_GPG_PASSPHRASE"} "$work/bundle/$f"
      signed=$((signed + 1))
    fi
    md5sum <"$work/bundle/$f" | cut -d' ' -f1 >"$work/bundle/$f.md5"
    sha1sum <"$work/bundle/$f" | cut -d' ' -f1 >"$work/bundle/$f.sha1"
    sha256sum <"$work/bundle/$f" | cut -d' ' -f1 >"$work/bundle/$f.sha256"
  done <"$work/files"
  # Every signature, checked in a keyring of the public keys only: the one
  # dist published beside the artifacts, and the one that signed here.
  mkdir -m 700 "$work/verify"
  if [ -f "$dist/maven-signing-key.asc" ]; then gpg --homedir "$work/verify" --batch --quiet --import "$dist/maven-signing-key.asc" 2>/dev/null; fi
  if [ "$signed" -gt 0 ]; then
    gpg --batch --armor --export ${MAVEN_GPG_KEY_ID:+"$MAVEN_GPG_KEY_ID"} | gpg --homedir "$work/verify" --batch --quiet --import 2>/dev/null
  fi
  while read -r f; do
    gpg --homedir "$work/verify" --batch --quiet --verify "$work/bundle/$f.asc" "$work/bundle/$f" 2>/dev/null ||
      die "$f: its signature does not verify (keys: $dist/maven-signing-key.asc, the signing key here)"
  done <"$work/files"
  # Central's rule: every artifact with a POM, sources and Javadoc.
  for pom in $(grep '\.pom$' "$work/files"); do
    local base=${pom%.pom} packaging
    packaging=$(sed -n 's|.*<packaging>\(.*\)</packaging>.*|\1|p' "$work/bundle/$pom" | head -n 1)
    [ "$packaging" = pom ] && continue
    for suffix in .jar -sources.jar -javadoc.jar; do
      [ -f "$work/bundle/$base$suffix" ] || die "$base$suffix is missing (Central requires it)"
    done
  done
  bundle=$work/etcdlock-$v-bundle.zip
  (cd "$work/bundle" && python3 -m zipfile -c "$bundle" io)
  say "Maven Central bundle: $(wc -l <"$work/files") files ($reused signed by dist, $signed here; every signature verified), with md5/sha1/sha256: $(du -k "$bundle" | cut -f1) kB"
  if [ "$dry" = 1 ]; then say "--dry-run: not uploaded"; return 0; fi
  user=${CENTRAL_TOKEN_USER:?CENTRAL_TOKEN_USER (the Central Portal token name) is not set}
  pass=${CENTRAL_TOKEN_PASS:?CENTRAL_TOKEN_PASS is not set}
  curl --fail-with-body -sS -X POST \
    -H "Authorization: Bearer $(printf '%s:%s' "$user" "$pass" | base64 | tr -d '\n')" \
    -F "bundle=@$bundle" \
    "https://central.sonatype.com/api/v1/publisher/upload?name=etcdlock-$v&publishingType=AUTOMATIC" >"$work/deployment"
  say "uploaded to the Central Portal: deployment $(cat "$work/deployment") (published once its validation passes)"
}

case "$mode" in
  --local) [ ${#args[@]} -eq 2 ] || usage; local_release "${args[0]}" "${args[1]}" ;;
  --check)
    [ ${#args[@]} -eq 1 ] || usage
    for e in "${ECOS[@]}"; do say "$e: check ${args[0]}"; bash "$(eco_script "$e")" check "$(abspath "${args[0]}")" || die "$e: its registry's checks failed"; done ;;
  --assets) [ ${#args[@]} -eq 1 ] || usage; assets "$(abspath "${args[0]}")" ;;
  --stop) [ ${#args[@]} -eq 1 ] || usage; stop_all "${args[0]}" ;;
  --tag-check)
    [ ${#args[@]} -eq 1 ] || usage
    [ "${args[0]}" = "v$(version)" ] || die "tag ${args[0]} is not v$(version), the workspace's version (Cargo.toml)"
    say "tag ${args[0]} = the workspace's version" ;;
  --maven-central) [ ${#args[@]} -eq 1 ] || usage; maven_central "${args[0]}" ;;
  *) usage ;;
esac
