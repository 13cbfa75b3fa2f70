#!/bin/sh
# One `make bench` run: every benchmark the project has, each part's output
# in $BENCHDIR, its wall time and exit status in $BENCHDIR/steps.txt; then
# dev/benchreport writes BENCHMARKS.md from them. Run from the repository
# root by the Makefile (which sets the variables below).
set -u
: "${GO:=go}" "${BIN:=bin/flexslurm}" "${BENCHDIR:=bin/bench}" "${CHAOSBENCH:=200}"
: "${TRACE:=../shared/traces/alibaba-openb-2023-default.csv}" "${REACT_EVENTS:=50}" "${REACT_BURST:=200}"
rm -rf "$BENCHDIR" && mkdir -p "$BENCHDIR"
D=$BENCHDIR
date -u '+%Y-%m-%d %H:%M:%S UTC' > "$D/start.txt"
cut -d' ' -f1-3 /proc/loadavg > "$D/load-start.txt"
echo "make bench (TRACE=$TRACE REACT_EVENTS=$REACT_EVENTS REACT_BURST=$REACT_BURST CHAOSBENCH=$CHAOSBENCH)" > "$D/command.txt"
echo "nproc $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), memory $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -sm)" > "$D/machine.txt"
$GO version > "$D/go-version.txt"
: > "$D/steps.txt"
: > "$D/commands.txt"

# step NAME OUTFILE CMD...: runs CMD, its stdout (and stderr) to OUTFILE
# and the terminal, and records its wall time and exit status.
step() {
	name=$1 out=$2
	shift 2
	echo "$name $*" >> "$D/commands.txt"
	echo "== bench: $name: $*"
	t0=$(date +%s.%N)
	{ "$@" 2>&1; echo $? > "$D/$name.rc"; } | tee "$D/$out.log"
	t1=$(date +%s.%N)
	echo "$name $(cat "$D/$name.rc") $(echo "$t1 - $t0" | bc | xargs printf '%.0f')" >> "$D/steps.txt"
}

# Reaction time first, alone on the machine as far as this run goes: its
# timings are the most sensitive to other load.
step react react "$BIN" bench react --events "$REACT_EVENTS" --burst "$REACT_BURST" --out "$D/react.md"
step expiry expiry "$BIN" bench expiry --seeds 1-10 --markdown --out "$D"
cp "$D/expiry.log" "$D/expiry.md"
if [ -f "$TRACE" ]; then
	step trace trace "$BIN" bench trace "$TRACE"
	cp "$D/trace.log" "$D/trace.md"
else
	echo "No trace at $TRACE (make bench TRACE=FILE): not run." > "$D/trace.md"
fi
if grep -qs "^func BenchmarkResumeProgram64Nodes(" shared/hooks/*_test.go; then
	step hooks bench-hooks "$BIN" emulators run -- $GO test ./shared/hooks -run '^$' -bench '^BenchmarkResumeProgram64Nodes$' -benchtime 100x -count 1
else
	echo "shared/hooks has no BenchmarkResumeProgram64Nodes" > "$D/bench-hooks.log"
fi
step chaos bench-chaos $GO test ./dev/chaos -run '^$' -bench '^BenchmarkRun$' -benchtime "${CHAOSBENCH}x" -count 1 -timeout 60m
# go test runs in the package's directory: the files are named by absolute paths.
A=$(cd "$D" && pwd)
export FLEXSLURM_BENCH_HOOKS="$A/bench-hooks.log" FLEXSLURM_BENCH_CHAOS="$A/bench-chaos.log" FLEXSLURM_BENCH_TABLE="$A/table.md"
step devbench devbench "$BIN" emulators run -- $GO test ./dev/bench -run '^$' -bench . -benchtime 1x -count 1 -timeout 60m
step gobench gobench "$BIN" emulators run -- $GO test -run '^$' -bench . -benchmem -count 1 ./shared/event ./shared/store ./dev/harness ./dev/computesim
cp "$D/gobench.log" "$D/gobench.txt"
cut -d' ' -f1-3 /proc/loadavg > "$D/load-end.txt"
date -u '+%Y-%m-%d %H:%M:%S UTC' > "$D/end.txt"
readme=$(dirname "$TRACE")/README.md
$GO run ./dev/benchreport -dir "$D" -trace-readme "$readme" > BENCHMARKS.md.new && mv BENCHMARKS.md.new BENCHMARKS.md
echo "== bench: BENCHMARKS.md written from $D ($(awk '{s+=$3} END {print s}' "$D/steps.txt") s of parts)"
