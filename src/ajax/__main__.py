"""``python -m ajax`` runs the command line."""

import sys

from ajax.cli import main

sys.exit(main())
