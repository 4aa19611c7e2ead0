#!/usr/bin/env python3
"""Create a practice directory for a chapter and work through its stages.

python practice.py 08 ~/lab08        then: python practice.py --help
"""

import sys

from coursekit.cli import main

if __name__ == "__main__":
    sys.exit(main())
