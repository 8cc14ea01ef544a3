# The clean room's PATH, shared by scripts/cleanroom.sh and the registry
# clean rooms (scripts/registry/*.sh install): a folder of links to every tool
# of /usr/local/bin, /usr/bin and /bin except compilers, linkers, assemblers,
# cargo, rustc and protoc, with python3 the real interpreter (not a pyenv
# shim); and a second folder with only cc, gcc, ld, as and cmake, for the
# checks that build C.
#   source scripts/cleanpath.sh
#   cleanpath DIR        makes DIR/cleanbin and DIR/ccbin, sets
#                        NOCC=DIR/cleanbin (no cargo, rustc, protoc, cc) and
#                        WITHCC=DIR/ccbin:DIR/cleanbin (a C compiler, still no
#                        cargo, rustc, protoc); returns 1 (with a message) if
#                        one of cargo, rustc, protoc, cc, gcc is still on NOCC.
# Sourced, so no `set` here: the caller's options stand.

cleanpath() {
  local dir=$1 d t n p realpy
  local clean=$dir/cleanbin cc_bin=$dir/ccbin
  mkdir -p "$clean" "$cc_bin"
  for d in /usr/local/bin /usr/bin /bin; do
    for t in "$d"/*; do
      n=$(basename "$t")
      case "$n" in
        cargo*|rustc*|rustup|rustdoc|protoc*|zig|cc|c++|c89*|c99*|gcc*|g++*|cpp*|clang*|tcc|*-gcc*|*-g++*|*-cc|ld|ld.*|*-ld|*-ld.*|as|*-as) continue ;;
      esac
      [ -e "$clean/$n" ] || ln -s "$t" "$clean/$n"
    done
  done
  realpy=$(python3 -c 'import sys; print(sys.executable)') || return 1
  ln -sf "$realpy" "$clean/python3"
  for t in cc gcc ld as cmake; do
    if p=$(command -v "$t"); then ln -sf "$p" "$cc_bin/$t"; fi
  done
  NOCC=$clean
  WITHCC=$cc_bin:$clean
  for t in cargo rustc protoc cc gcc; do
    if PATH=$NOCC command -v "$t" >/dev/null; then
      echo "cleanpath: $t is still on the clean PATH" >&2
      return 1
    fi
  done
}
