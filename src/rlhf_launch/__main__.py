import sys

from rlhf_launch.cli.app import main

sys.exit(main())
