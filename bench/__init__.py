"""splatbench: policy-ranking reliability of Gaussian-splat simulators under damaged reconstructions."""

__version__ = "0.1.0"
