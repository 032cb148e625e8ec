"""splatbench: do Gaussian-splat simulators keep real policy rankings when damaged?"""

__version__ = "0.1.0"
