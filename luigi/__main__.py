"""`python -m luigi ...` behaves exactly like the `luigi` command."""

import sys

from luigi.cmdline import luigi_run

if __name__ == "__main__":
    luigi_run(sys.argv[1:])
