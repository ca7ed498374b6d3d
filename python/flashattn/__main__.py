"""python -m flashattn info: the C library's report (what `flashattn info`
prints: version, kernel paths, CPU, caches, threads), plus where the
library and the package were loaded from, for bug reports."""

import sys


def main(argv):
    if argv[1:] != ["info"]:
        print("usage: python -m flashattn info", file=sys.stderr if argv[1:] else sys.stdout)
        return 2 if argv[1:] else 0
    import flashattn
    from flashattn import _lib
    _lib.require("flashattn_info", "python -m flashattn info")
    sys.stdout.write(_lib.lib.flashattn_info().decode())
    print("library         %s" % _lib.lib._name)
    print("package         %s" % flashattn.__file__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
