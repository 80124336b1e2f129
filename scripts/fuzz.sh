#!/usr/bin/env bash
# fuzz.sh (make fuzz): fuzzes every fuzz target of the module, one at a time, each for
# FUZZTIME (default 30s). Targets are found afresh on every run: each `func FuzzXxx(f
# *testing.F)` in a test file that `go list` says the build includes, so a target added
# anywhere is fuzzed without editing this script. Arguments are package patterns (default
# ./...); FUZZFLAGS adds go test flags (e.g. FUZZFLAGS=-parallel=1). FUZZMINIMIZETIME (default
# 10s) bounds the minimizing of each input that finds new coverage or fails: go test's
# default of 60s would let one input take the whole of a 30s run, executing nothing new. A
# crasher is written under its package's testdata/fuzz/ by go test, and is a seed of `make
# test` from then on. Exits non-zero when any target failed, after running them all.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
fuzztime=${FUZZTIME:-30s}
minimizetime=${FUZZMINIMIZETIME:-10s}
read -r -a flags <<<"${FUZZFLAGS:-}"
if [ $# -eq 0 ]; then
	set -- ./...
fi

say() { echo "fuzz.sh: $*" >&2; }

targets=()
while read -r pkg dir files; do
	for file in $files; do
		while read -r name; do
			targets+=("$pkg $name")
		done < <(sed -nE 's/^func (Fuzz[A-Z0-9_][A-Za-z0-9_]*|Fuzz)\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\).*/\1/p' "$dir/$file")
	done
done < <("$go" list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' "$@")

if [ ${#targets[@]} -eq 0 ]; then
	say "no fuzz targets in $*"
	exit 0
fi
say "${#targets[@]} targets, $fuzztime each"
failed=()
for target in "${targets[@]}"; do
	read -r pkg name <<<"$target"
	say "$name ($pkg)"
	if ! "$go" test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimizetime" ${flags[@]+"${flags[@]}"} "$pkg"; then
		failed+=("$name ($pkg)")
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	say "failed: ${failed[*]}"
	exit 1
fi
say "all ${#targets[@]} targets passed"
