"""``python -m aiorocketmq``: the same as the ``aiorocketmq`` console script."""

import sys

from aiorocketmq.cli.main import main

sys.exit(main())
