"""Helpers upstream Horovod exposes under horovod.runner.util (its test utilities import them)."""
