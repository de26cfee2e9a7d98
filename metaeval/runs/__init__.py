"""Run infrastructure: run directories, atomic files, the memory budget, BLAS threads,
the recorded build, and report tables."""
