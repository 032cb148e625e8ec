# /// script
# requires-python = ">=3.10,<3.12"
# dependencies = ["lerobot==0.4.4", "splatserve"]
#
# [tool.uv.sources]
# # the kit beside this script in a splatbench checkout; elsewhere point it at your copy
# splatserve = { path = "..", editable = true }
# ///
r"""Serve a LeRobot checkpoint over the openpi protocol, in an environment uv makes for it.

    uv run serving/scripts/serve_lerobot.py --port 8000 \
        --checkpoint outputs/train/act/checkpoints/last/pretrained_model

uv reads the inline metadata above (PEP 723): LeRobot 0.4.4 with the torch it accepts
(torch<2.11 from PyPI) and the policy-server kit; nothing of the bench. The arguments are
those of ``python -m splatserve.lerobot`` (``--device``, ``--camera CLIENT=IMAGE``,
``--state-layout``, ``--action-layout``, ``--action-mode``, ``--latency-budget-ms``,
``--host``, ``--port``): the kit's LeRobot server, run by uv.
"""

import sys

from splatserve.lerobot import main

if __name__ == "__main__":
    sys.exit(main())
