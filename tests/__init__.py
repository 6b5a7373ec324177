"""The test suites. A package, so that pytest imports every suite's modules under names of their
own (tests.engine.test_errors, tests.engine.conftest, ...) with the repository root on sys.path:
several suites then share one pytest process, and all import the helpers in tests.support."""
