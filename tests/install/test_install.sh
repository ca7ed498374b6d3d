#!/bin/bash
# Installs the build this test runs in into a fresh temporary prefix, checks
# what was installed (files, symlinks, SONAME, components, no build-tree
# paths or internal targets in the package files), then builds
# downstream.c against the installed copy the two ways C users do:
#   - a CMake project: find_package(flashattn) with flashattn::flashattn and
#     flashattn::flashattn_static;
#   - pkg-config: `pkg-config --cflags --libs flashattn`, and --static
#     against libflashattn.a;
# and runs each program. The prefix is moved after the install, so that a
# path to it written into the package would show.
# Usage: bash test_install.sh BUILD_DIR SOURCE_DIR CMAKE CC CONFIG SANITIZE
#        VERSION LIBDIR INCLUDEDIR DOCDIR GENERATOR [MPI]
# MPI = 1 when the build has the MPI component (its library and header
# are then installed too).
set -u
BUILD=${1:?usage: see the head of test_install.sh} SRC=$2 CMAKE=$3 CC=$4 CONFIG=$5
SANITIZE=$6 VERSION=$7 LIBDIR=$8 INCLUDEDIR=$9 DOCDIR=${10} GENERATOR=${11} MPI=${12:-0}
# These would send the install elsewhere (DESTDIR), make it symlinks into the
# build tree (CMAKE_INSTALL_MODE) or prefix pkg-config's paths: the test
# checks the plain install.
unset DESTDIR CMAKE_INSTALL_MODE PKG_CONFIG_SYSROOT_DIR
failures=0
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }
die() { echo "FAIL: $*"; exit 1; }
for tool in pkg-config readelf; do
  command -v $tool >/dev/null || die "$tool is needed (.ci/run installs it)"
done
for d in "$LIBDIR" "$INCLUDEDIR" "$DOCDIR"; do
  case $d in /*) die "CMAKE_INSTALL_* path $d is absolute: it would install outside the test's prefix";; esac
done
T=$(mktemp -d "${TMPDIR:-/tmp}/fa_test_install.XXXXXX")
trap 'rm -rf "$T"' EXIT
STAGE=$T/stage P=$T/prefix
config_arg=()
[ -n "$CONFIG" ] && config_arg=(--config "$CONFIG")
# A sanitizer build installs instrumented libraries, whose users must link
# the sanitizer runtime too (ASan must be first in the initial library list):
# the downstream programs are built as such a user would build them.
san=()
case $SANITIZE in ON|on|1|TRUE|true|YES|yes)
  san=(-fsanitize=address,undefined)
  echo "sanitizer build: downstream programs built with ${san[*]}";;
esac

# ---- what gets installed ----------------------------------------------------
"$CMAKE" --install "$BUILD" --prefix "$STAGE" "${config_arg[@]}" >"$T/install.log" 2>&1 ||
  { cat "$T/install.log"; die "cmake --install failed"; }
lc=$(printf %s "${CONFIG:-noconfig}" | tr '[:upper:]' '[:lower:]')
so=libflashattn.so major=${VERSION%%.*}
runtime_files="$LIBDIR/$so.$VERSION $LIBDIR/$so.$major $DOCDIR/LICENSE"
devel_files="$INCLUDEDIR/flashattn.h $LIBDIR/libflashattn.a $LIBDIR/$so
  $LIBDIR/cmake/flashattn/flashattnConfig.cmake $LIBDIR/cmake/flashattn/flashattnConfigVersion.cmake
  $LIBDIR/cmake/flashattn/flashattnTargets.cmake $LIBDIR/cmake/flashattn/flashattnTargets-$lc.cmake
  $LIBDIR/pkgconfig/flashattn.pc"
if [ "$MPI" = 1 ]; then
  mso=libflashattn_mpi.so
  runtime_files="$runtime_files $LIBDIR/$mso.$VERSION $LIBDIR/$mso.$major"
  devel_files="$devel_files $INCLUDEDIR/flashattn_mpi.h $LIBDIR/$mso"
fi
listing() { (cd "$1" && find . ! -type d | sed 's|^\./||' | sort); }
expect() { printf '%s\n' $1 | sort; }
check_tree() { # dir, expected files, what
  local got want
  got=$(listing "$1") want=$(expect "$2")
  [ "$got" = "$want" ] || fail "$3 installs other files than expected (< expected, > installed):
$(diff <(echo "$want") <(echo "$got") | grep '^[<>]')"
}
check_tree "$STAGE" "$runtime_files $devel_files" "cmake --install"
# Packagers split runtime (the versioned library) from devel; the wheel
# installs only "python", which a build without SKBUILD does not have.
for comp in runtime devel python; do
  "$CMAKE" --install "$BUILD" --prefix "$T/c_$comp" --component $comp "${config_arg[@]}" >/dev/null 2>&1 ||
    fail "cmake --install --component $comp failed"
  mkdir -p "$T/c_$comp"
done
check_tree "$T/c_runtime" "$runtime_files" "component runtime"
check_tree "$T/c_devel" "$devel_files" "component devel"
check_tree "$T/c_python" "" "component python"

L=$STAGE/$LIBDIR
[ "$(readlink "$L/$so")" = "$so.$major" ] || fail "$so should link to $so.$major, links to '$(readlink "$L/$so")'"
[ "$(readlink "$L/$so.$major")" = "$so.$VERSION" ] ||
  fail "$so.$major should link to $so.$VERSION, links to '$(readlink "$L/$so.$major")'"
soname=$(readelf -d "$L/$so.$VERSION" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "$so.$major" ] || fail "SONAME of $so.$VERSION is '$soname', expected $so.$major"
# Paths into the source or build tree, or into the staging prefix (which is
# about to move), would break the package on any other machine; internal
# targets would make find_package fail ("target not found").
pkg_files=$(cd "$STAGE" && ls "$LIBDIR"/cmake/flashattn/*.cmake "$LIBDIR"/pkgconfig/flashattn.pc)
for f in $pkg_files; do
  for bad in "$(cd "$SRC" && pwd -P)" "$(cd "$BUILD" && pwd -P)" "$SRC" "$BUILD" "$STAGE"; do
    grep -qF "$bad" "$STAGE/$f" && fail "$f holds the path $bad: $(grep -F "$bad" "$STAGE/$f" | head -3)"
  done
  grep -qE 'flashattn_objs|flashattn_internal|flashattn_reference' "$STAGE/$f" &&
    fail "$f names internal targets: $(grep -E 'flashattn_objs|flashattn_internal|flashattn_reference' "$STAGE/$f" | head -3)"
done
[ $failures = 0 ] || { echo "$failures failure(s) in the installed tree"; exit 1; }
mv "$STAGE" "$P"

needs_so() { readelf -d "$1" | grep -q "(NEEDED).*\[$so\.$major\]"; }
run_prog() { # program, what
  local out
  if out=$(LD_LIBRARY_PATH="$P/$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$1" 2>&1); then
    echo "  $2: $out"
  else
    fail "$2 failed: $out"
  fi
}

# ---- CMake: find_package(flashattn) ----------------------------------------
if "$CMAKE" -S "$SRC/tests/install" -B "$T/cm" -G "$GENERATOR" -DCMAKE_C_COMPILER="$CC" \
     -DCMAKE_BUILD_TYPE="$CONFIG" -DCMAKE_PREFIX_PATH="$P" -DFA_EXPECT_PREFIX="$P" \
     -DFA_EXPECT_VERSION="$VERSION" -DCMAKE_C_FLAGS="${san[*]}" \
     -DCMAKE_EXE_LINKER_FLAGS="${san[*]}" >"$T/cm.log" 2>&1 &&
   "$CMAKE" --build "$T/cm" >>"$T/cm.log" 2>&1; then
  needs_so "$T/cm/use_shared" || fail "use_shared (flashattn::flashattn) does not load $so.$major"
  needs_so "$T/cm/use_static" && fail "use_static (flashattn::flashattn_static) loads $so.$major"
  run_prog "$T/cm/use_shared" "find_package, flashattn::flashattn"
  run_prog "$T/cm/use_static" "find_package, flashattn::flashattn_static"
else
  cat "$T/cm.log"
  fail "the downstream CMake project did not configure or build"
fi

# ---- pkg-config ----------------------------------------------------------------
export PKG_CONFIG_PATH=$P/$LIBDIR/pkgconfig PKG_CONFIG_LIBDIR=$P/$LIBDIR/pkgconfig
if ! pkg-config --exact-version="$VERSION" flashattn; then
  fail "pkg-config: flashattn $VERSION not found (modversion '$(pkg-config --modversion flashattn 2>&1)')"
else
  cflags=$(pkg-config --cflags flashattn) libs=$(pkg-config --libs flashattn)
  # -l:libflashattn.a picks the archive while keeping --static's Libs.private,
  # so a flag missing there (-fopenmp, -lm) shows as an undefined symbol.
  static_libs=$(pkg-config --static --libs flashattn | sed 's/-lflashattn\b/-l:libflashattn.a/')
  if "$CC" "${san[@]}" -Wall -Wextra -Werror -DFA_EXPECT_VERSION="\"$VERSION\"" \
       "$SRC/tests/install/downstream.c" -o "$T/pc_shared" $cflags $libs 2>"$T/pc.log"; then
    needs_so "$T/pc_shared" || fail "pkg-config --libs does not link $so.$major"
    run_prog "$T/pc_shared" "pkg-config --libs"
  else
    cat "$T/pc.log"; fail "pkg-config: cc \$(pkg-config --cflags --libs flashattn) failed ($cflags $libs)"
  fi
  if "$CC" "${san[@]}" -Wall -Wextra -Werror -DFA_EXPECT_VERSION="\"$VERSION\"" \
       "$SRC/tests/install/downstream.c" -o "$T/pc_static" $cflags $static_libs 2>"$T/pc.log"; then
    needs_so "$T/pc_static" && fail "pkg-config --static with libflashattn.a still loads $so.$major"
    run_prog "$T/pc_static" "pkg-config --static"
  else
    cat "$T/pc.log"; fail "pkg-config: static link with Libs.private failed ($cflags $static_libs)"
  fi
fi

if [ $failures = 0 ]; then echo "test_install: all checks passed"; else echo "$failures failure(s)"; exit 1; fi
