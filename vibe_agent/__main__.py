"""`python -m vibe_agent`: see vibe_agent/cli.py."""

import sys

from .cli import main

sys.exit(main())
