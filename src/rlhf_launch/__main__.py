import sys

from rlhf_launch.cli import main

sys.exit(main())
