"""Swap a workspace's folder d/ for a link out, atomically, again and again, until killed.

    python benchmarks/swap_racer.py WORKSPACE OUTSIDE

The hostile background process of benchmarks/probe_tools.py and of the race test in
tests/test_coding_tools.py (one script, run by both): it makes WORKSPACE/d.link, a
link to OUTSIDE, prints "racing" once it is ready, then exchanges d and d.link with
renameat2(RENAME_EXCHANGE), so a tool walking d/... meets a folder one moment and a
link out of the workspace the next. Linux only.
"""

import ctypes
import os
import sys

ws, outside = sys.argv[1], sys.argv[2]
os.chdir(ws)
os.symlink(outside, "d.link")
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
print("racing", flush=True)
while True:  # swap d/ (a folder inside) and d.link (a link out) atomically, again and again
    if libc.renameat2(AT_FDCWD, b"d", AT_FDCWD, b"d.link", RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
