"""The `toolloop` console script.

`toolloop audit verify` runs before the rest of the command line interface is
imported: it needs no database, no settings and nothing of the service
(`app.audit_verify_command`), and checks a bundle wherever the package is
installed. Every other command is `app.cli`'s.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:2] == ["audit", "verify"]:
        from app.audit_verify_command import main as verify

        return verify(args[2:])
    from app.cli import main as cli

    return cli(args)


if __name__ == "__main__":
    sys.exit(main())
