"""`python -m workflows.lint FILE...`"""

import sys

from workflows.lint.documents import main

sys.exit(main())
