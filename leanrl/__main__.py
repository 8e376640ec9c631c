import sys

from leanrl.cli import main

sys.exit(main())
