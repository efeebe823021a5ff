"""`python -m vibe_agent`: see vibe_agent/course/cli.py."""

import sys

from .course.cli import main

sys.exit(main())
