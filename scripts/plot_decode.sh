#!/usr/bin/env bash
# Plots decode tokens/s against the memory-bandwidth bound for each model
# shape of `make bench` (build/bench-models/decode.tsv), and against the read
# bound over each model's working set, all against the bytes of weights one
# token reads, log-log, to a PNG with gnuplot.
#   scripts/plot_decode.sh [build/bench-models/decode.tsv] [docs/decode-bound.png]
set -eu
tsv=${1:-build/bench-models/decode.tsv} out=${2:-docs/decode-bound.png}
command -v gnuplot >/dev/null || { echo "plot_decode.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
gnuplot <<GP
set terminal pngcairo size 960,600 font "sans,11"
set output "$out"
set datafile separator "\t"
set logscale xy
set grid
set key top right
set title "decode, 2 threads: tokens/s against the memory-bandwidth bounds"
set xlabel "MB of weights read per token"
set ylabel "tokens/s"
set xrange [5:1000]
set yrange [20:10000]
plot "$tsv" every ::1 using (\$3/1e6):5 smooth unique with linespoints lw 2 pt 6 lc rgb "#555555" title "bound: triad bandwidth / bytes per token", \
     "$tsv" every ::1 using (\$3/1e6):6 with points pt 4 ps 1.3 lc rgb "#1f77b4" title "read bound: read bandwidth over the working set / its bytes", \
     "$tsv" every ::1 using (\$3/1e6):4 with points pt 7 ps 1.3 lc rgb "#d62728" title "smallmind decode", \
     "$tsv" every ::1 using (\$3/1e6):4:1 with labels offset 1,0.8 left font "sans,9" notitle
GP
echo "$out"
