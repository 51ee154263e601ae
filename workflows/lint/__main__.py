"""`python -m workflows.lint FILE...`"""

import sys

from workflows.lint.entry_point import main

sys.exit(main())
