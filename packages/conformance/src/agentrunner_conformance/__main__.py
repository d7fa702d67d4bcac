"""``python -m agentrunner_conformance``: the same as the ``agentrunner-conformance`` script."""

from .cli import cli_exit

cli_exit()
