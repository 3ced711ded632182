import sys

from broker_sim.server.cli import main

sys.exit(main())
