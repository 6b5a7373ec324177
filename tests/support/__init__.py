"""Helpers shared by the suites (one copy each):

- paths: where things are (the repository root, the GPU build's site) and versions.env;
- mpi: launching MPI ranks or plain processes with a hard timeout, checking per-rank verdicts;
- scenario: the rank side of that protocol, the runner of the scenario programs;
- fixtures: fixtures several suites use (a conftest imports them to offer them).

It imports nothing from horovod: a suite may test a build other than the source tree's.
"""
