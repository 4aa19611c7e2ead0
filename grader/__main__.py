import sys

from grader._cli import main

sys.exit(main())
