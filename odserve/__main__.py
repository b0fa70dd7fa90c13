"""``python -m odserve``: the class launcher (:func:`odserve.launcher.main`)."""

import sys

from odserve.launcher import main

sys.exit(main())
