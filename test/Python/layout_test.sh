#!/bin/sh
# ctest python-layout: the layout rules of issue 31 for the Python files.
# usage: layout_test.sh SOURCE_DIR
#  1. No Python file edits sys.path (insert, append, extend, or assigning it):
#     scripts import each other from their own folder or from PYTHONPATH,
#     which lit (test/lit.cfg.py) and ctest set.
#  2. python/ holds no test driver: check_*.py and the other drivers of the
#     lit tests and the zoo live in test/drivers (its README).
# Prints each offending line or file and exits 1.
set -u
src=$1
status=0
hits=$(cd "$src" && grep -rnE --include='*.py' --include='*.test' --include='*.mlir' \
         --include='*.sh' 'sys[.]path *([.](insert|append|extend)|=[^=]|\+=)' \
         python test bench examples scripts 2>/dev/null)
if [ -n "$hits" ]; then
  echo "error: these lines edit sys.path; import from PYTHONPATH instead (test/drivers/README.md):"
  echo "$hits"
  status=1
fi
drivers=$(cd "$src" && ls python/check_*.py python/pipeline.py python/compare.py \
            python/export_pt2.py python/zoo.py 2>/dev/null)
if [ -n "$drivers" ]; then
  echo "error: test drivers in the installable python/; they belong in test/drivers:"
  echo "$drivers"
  status=1
fi
[ $status -eq 0 ] && echo "ok: no sys.path edits; no test drivers in python/"
exit $status
