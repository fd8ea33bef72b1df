"""``python -m ndpdimm.cosim.model.calibrate``: the stand-alone ``ndpdimm calibrate`` (``command.main``)."""

import sys

from ndpdimm.cosim.model.calibrate.command import main

sys.exit(main())
