#!/bin/bash
# README.md's C quick start, compiled and run as the README tells a user to:
# the first ```c block after the <!-- quickstart-c --> marker saved as
# quick.c, then the README's own `cc ...` command (the first one in its
# "C quick start" section) run in a directory where include/ and build/
# are this tree's and this build's. So the include, link and run-time
# flags it gives are the ones tested: a README edit that breaks the
# snippet or the command, or a build that stops putting libflashattn.so
# where the command looks for it, fails here rather than on a user's
# machine. cc is this build's compiler (clang in a clang build), with
# -Wall -Wextra -pedantic -Werror: gcc before 14 accepts a call to an
# undeclared function (a missing #include) with only a warning.
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
cmd=$(awk -v marker="$MARKER" '/^## C quick start/ { s = 1 } index($0, marker) { exit } s' "$README" |
    grep -o '`cc [^`]*`' | head -n 1 | tr -d '`')
[ -n "$cmd" ] || die "README.md's C quick start gives no \`cc ...\` command before its code"
echo "README's command: $cmd"
ln -s "$SRC/include" "$T/include" && ln -s "$BUILD" "$T/build" || die "cannot link include/ and build/ into $T"
CCBIN=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
# A sanitizer build's library needs the sanitizer runtime first in the
# process, so the program is built with the same runtime there.
SAN=
grep -q '^FLASHATTN_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN=-fsanitize=address,undefined
cc() { command "${CCBIN:-${CC:-cc}}" "$@" -Wall -Wextra -pedantic -Werror $SAN; }
out=$(cd "$T" && eval "$cmd" 2>&1)
rc=$?
echo "$out"
[ -x "$T/a.out" ] || die "the C quick start does not compile as written (output above)"
[ $rc = 0 ] || die "the C quick start exited with status $rc"
# The line it prints names the version of the library it ran: this build's,
# not some other libflashattn on the system.
version=$("$BIN" --version | awk '{ print $2 }')
echo "$out" | grep -Eq "^flashattn $version \([a-z0-9]+\): max \|O - reference\| = [0-9.e+-]+: ok$" ||
    die "expected 'flashattn $version (<isa>): max |O - reference| = <err>: ok', got the output above"
echo "PASS: README C quick start"
