#!/usr/bin/env bash
# bench/figures.sh - draw the benchmark figures (SVG, gnuplot) from one run's
# data points, the file the benchmarks append to with --points (tab-separated
# "figure series x y unit"; bench/run passes build/bench/results/points.tsv).
#
# usage: bench/figures.sh POINTS OUTDIR WHEN
#   POINTS  the data points of one bench/run
#   OUTDIR  where the SVGs go (bench/run: bench/figures), with a copy of POINTS
#   WHEN    the run's time, printed in every figure's title
# Prints the markdown that links the figures (bench/run puts it in
# RESULTS.md).  Each figure is one .gp file next to this script, given
# datafile, outfile, when (and ncpu) with -e; a figure whose points are
# missing is left out with a line saying so.
# Exit status: 0 (drawn or skipped), 2 on a usage error, 1 if gnuplot failed.
# Needs gnuplot (Debian: gnuplot-nox), a bench dependency only: without it
# the figures are skipped with a message.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -eq 3 ]] || { sed -n '5,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
points="$1" outdir="$2" when="$3"

if ! command -v gnuplot >/dev/null; then
  echo "bench/figures.sh: gnuplot not found (apt-get install gnuplot-nox): figures skipped" >&2
  printf 'Figures skipped: gnuplot not found (`apt-get install gnuplot-nox`).\n'
  exit 0
fi
if [[ ! -s "$points" ]]; then
  echo "bench/figures.sh: no data points in $points: figures skipped" >&2
  printf 'Figures skipped: the run wrote no data points.\n'
  exit 0
fi
mkdir -p "$outdir"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$points" "$work/points.tsv"
cp "$points" "$outdir/points.tsv"
ncpu=$(nproc)

# scaling.dat: one row per thread count, one column per series (in the order
# the benchmark wrote them), a header row of the series names.
awk -F'\t' '$1 == "scaling" {
    if (!($2 in col)) { col[$2] = ++ns; name[ns] = $2 }
    if (!($3 in row)) { row[$3] = ++nr; x[nr] = $3 }
    v[row[$3], col[$2]] = $4 }
  END {
    if (!nr) exit
    printf "threads"; for (s = 1; s <= ns; s++) printf "\t\"%s\"", name[s]; printf "\n"
    for (r = 1; r <= nr; r++) {
      printf "%s", x[r]
      for (s = 1; s <= ns; s++) printf "\t%s", ((r, s) in v ? v[r, s] : "NaN")
      printf "\n" } }' "$work/points.tsv" >"$work/scaling.dat"

# compile_avoidance.dat: one row per (tier, example), memory then directory
# then Redis: tier, example, cold us, warm us.
awk -F'\t' '$1 == "compile_avoidance" {
    if (!($3 in row)) { row[$3] = ++nr; x[nr] = $3 }
    if ($2 ~ /^cold/) cold[$3] = $4; else warm[$3] = $4 }
  END {
    for (r = 1; r <= nr; r++) {
      c = x[r]; split(c, p, ", ")
      rank = p[1] == "memory" ? 1 : p[1] == "directory" ? 2 : 3
      printf "%d\t%d\t\"%s\"\t\"%s\"\t%s\t%s\n", rank, r, p[1], p[2],
        (c in cold ? cold[c] : "NaN"), (c in warm ? warm[c] : "NaN") } }' "$work/points.tsv" |
  sort -t$'\t' -k1,1n -k2,2n | cut -f3- >"$work/compile_avoidance.dat"

status=0
echo "## Figures"
echo
echo "Drawn by \`bench/figures.sh\` (gnuplot) from this run's data points ($when;"
echo "the points are [figures/points.tsv](figures/points.tsv))."
echo
draw() { # name, caption
  local name="$1" caption="$2"
  if [[ ! -s "$work/$name.dat" ]]; then
    echo "bench/figures.sh: no $name points: $name.svg not drawn" >&2
    printf -- '- %s: not drawn (no data points in this run)\n' "$caption"
    return 0
  fi
  if gnuplot -e "datafile='$work/$name.dat'; outfile='$outdir/$name.svg'; when='$when'; ncpu=$ncpu" \
       "$here/figures/$name.gp" 2>"$work/$name.log"; then
    printf -- '- %s (%s): [figures/%s.svg](figures/%s.svg)\n\n  ![%s](figures/%s.svg)\n\n' \
      "$caption" "$when" "$name" "$name" "$caption" "$name"
  else
    echo "bench/figures.sh: gnuplot failed on $name.gp:" >&2
    cat "$work/$name.log" >&2
    printf -- '- %s: gnuplot failed\n' "$caption"
    status=1
  fi
}
draw scaling "Scaling: aggregate hits/s against threads, 361-site walk (bench_scaling)"
draw compile_avoidance "Compile avoidance: a program's compile (cold) against the tier's answer (warm), per tier (bench_onednn, bench_kernel_jit, bench_halide_jit)"
exit "$status"
