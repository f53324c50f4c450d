"""Runs a command and prints its peak resident set size as a benchmark figure.

  python3 bench/peak_rss.py NAME COMMAND [ARG...]

COMMAND's output passes through unchanged; then one line `NAME <MB> MB` (MB = 10^6 bytes) with
the largest resident set size of COMMAND or any process it waited for (getrusage(RUSAGE_CHILDREN)
.ru_maxrss, in KiB on Linux). This wrapper's own memory is not counted. Exits with COMMAND's
status (no figure when it failed). Used by scripts/bench.sh for `cinder train` and its PyTorch
twins: the standard library only, so that no `time` package is needed."""
import resource
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: peak_rss.py NAME COMMAND [ARG...]")
    sys.stdout.flush()
    rc = subprocess.call(sys.argv[2:])
    if rc == 0:
        kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"{sys.argv[1]} {kib * 1024 / 1e6:.6g} MB", flush=True)
    sys.exit(rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    main()
