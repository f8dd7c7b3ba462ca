#!/usr/bin/env bash
# Plots a training run's loss.csv (bits per byte) to a PNG with gnuplot.
#   scripts/plot_loss.sh MODEL_DIR/loss.csv OUT.png [TITLE]
set -eu
csv=$1 out=$2 title=${3:-training loss}
command -v gnuplot >/dev/null || { echo "plot_loss.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
gnuplot <<GP
set terminal pngcairo size 900,540 font "sans,11"
set output "$out"
set datafile separator ","
set key top right
set grid
set title "$title"
set xlabel "step (16 x 256 tokens each)"
set ylabel "loss, bits per byte"
set yrange [0:6]
ln2 = log(2)
plot "$csv" every ::1 using 1:(\$3/ln2) with lines lw 1 lc rgb "#9ecae1" title "train (each step's batch)", \
     "$csv" every ::1 using 1:(strcol(4) eq "" ? NaN : \$4/ln2) with linespoints lw 2 pt 7 ps 0.8 lc rgb "#d62728" title "held-out", \
     1.5 with lines dt 2 lc rgb "#555555" title "goal: 1.5 bits/byte"
GP
echo "$out"
