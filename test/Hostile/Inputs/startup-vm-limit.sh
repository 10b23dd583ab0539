#!/usr/bin/env bash
# usage: startup-vm-limit.sh CMD [ARGS...]
# Prints the smallest address-space limit (ulimit -v, KiB, to within 16 MiB)
# under which CMD exits 0: what the command needs to start (its binary and
# shared libraries) and run. Tests add a margin to it, so that an
# allocation beyond the margin fails whatever the machine's libraries weigh.
# A run that has not ended after 30 s counts as not fitting (OpenBLAS's
# thread server spins at start when a limit leaves it too little; callers
# set OPENBLAS_NUM_THREADS=1).
lo=16384 hi=16777216
fits() { { bash -c 'ulimit -v "$0" && exec timeout 30 "$@"' "$1" "${@:2}" > /dev/null 2>&1; } 2> /dev/null; }
if ! fits "$hi" "$@"; then
  echo "startup-vm-limit.sh: '$*' does not run within $hi KiB" >&2
  exit 1
fi
while (( hi - lo > 16384 )); do
  mid=$(( (lo + hi) / 2 ))
  if fits "$mid" "$@"; then hi=$mid; else lo=$mid; fi
done
echo "$hi"
