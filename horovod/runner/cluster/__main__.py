"""`python -m horovod.runner.cluster`: compose/compose.yaml's launcher entrypoint."""

import sys

from horovod.runner.cluster.entrypoint import main

sys.exit(main())
