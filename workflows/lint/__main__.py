"""`python -m workflows.lint FILE...`"""

import sys

from workflows.lint.documents.documents import main

sys.exit(main())
