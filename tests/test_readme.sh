#!/bin/bash
# README.md's C quick start, compiled and run as the README tells a user to:
# the first ```c block after the <!-- quickstart-c --> marker, built with
# `cc -std=c11 quick.c -I include -L build -lflashattn -lm` against this
# build's shared library and run with LD_LIBRARY_PATH=build. A README edit
# that breaks the snippet, or a build that stops putting libflashattn.so
# where the README's command looks for it, fails here rather than on a
# user's machine.
# Usage: bash test_readme.sh path/to/build/flashattn
set -u
BIN=${1:?usage: test_readme.sh path/to/build/flashattn}
[ -x "$BIN" ] || { echo "test_readme.sh: $BIN is not an executable"; exit 1; }
BUILD=$(cd "$(dirname "$BIN")" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
README=$SRC/README.md
MARKER='<!-- quickstart-c -->'
T=$(mktemp -d "${TMPDIR:-/tmp}/fa_test_readme.XXXXXX")
trap 'rm -rf "$T"' EXIT
die() { echo "FAIL: $*"; exit 1; }

[ -f "$README" ] || die "no README.md at $README"
n=$(grep -cF -- "$MARKER" "$README")
[ "$n" = 1 ] || die "README.md has $n '$MARKER' markers, expected exactly 1 (before the C quick start's \`\`\`c block)"
# From the marker on, the first ```c fence opens the block and the next
# ``` fence closes it; exit status 3: no opening fence, 4: never closed.
awk -v marker="$MARKER" '
    index($0, marker) { seen = 1; next }
    seen && !open && /^```c[ \t]*$/ { open = 1; next }
    open && /^```[ \t]*$/ { closed = 1; exit }
    open { print }
    END { if (!open) exit 3; if (!closed) exit 4 }' "$README" >"$T/quick.c"
case $? in
0) ;;
3) die "no \`\`\`c block after '$MARKER' in README.md" ;;
4) die "the \`\`\`c block after '$MARKER' in README.md is never closed" ;;
*) die "awk failed reading README.md" ;;
esac
grep -q 'int main' "$T/quick.c" || die "the C quick start has no main(): it must be a complete program"

[ -e "$BUILD/libflashattn.so" ] ||
    die "no $BUILD/libflashattn.so: the README's 'cc ... -L build -lflashattn' needs the shared library there"
# A sanitizer build's library needs the sanitizer runtime first in the
# process, so the program is built with the same runtime there.
SAN=
grep -q '^FLASHATTN_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN=-fsanitize=address,undefined
(cd "$T" && ${CC:-cc} -std=c11 quick.c -I "$SRC/include" -L "$BUILD" -lflashattn -lm $SAN -o quick) \
    >"$T/cc.log" 2>&1 || { cat "$T/cc.log"; die "the C quick start does not compile as written"; }

out=$(cd "$T" && LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ./quick 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || die "the C quick start exited with status $rc"
# The line it prints names the version of the library it ran: this build's,
# not some other libflashattn on the system.
version=$("$BIN" --version | awk '{ print $2 }')
echo "$out" | grep -Eq "^flashattn $version \([a-z0-9]+\): max \|O - reference\| = [0-9.e+-]+: ok$" ||
    die "expected 'flashattn $version (<isa>): max |O - reference| = <err>: ok', got the output above"
echo "PASS: README C quick start"
