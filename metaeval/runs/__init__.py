"""Run infrastructure: run directories, atomic files, the memory budget and measured memory, BLAS threads,
the recorded build, and report tables."""
