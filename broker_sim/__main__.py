import sys

from broker_sim.cli import main

sys.exit(main())
