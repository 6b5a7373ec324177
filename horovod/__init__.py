"""Horovod: data-parallel training with a C++ collective engine over Open MPI."""

__version__ = "0.1.0"
